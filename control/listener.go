package control

import (
	"context"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// Listeners (rdma_listen, libfabric's passive endpoint). A listener is a
// service number on one engine, drawn like a queue pair number (random,
// so a number seen says nothing of the next), with a token (spec §7.3)
// that a peer's CONNECT must carry unless the listener is public. A
// public listener may instead have a number the application chose (a
// port number, for peers that learn only the address and the port, as
// libfabric's fi_getinfo service): any number the daemon could draw for
// its engine that no queue pair or listener holds (claimService). The
// transport holds every connection a peer makes to it Pending (its
// cookie exchange made sure the peer is at its address) and reports it
// as a connection request, which waits in the listener's backlog until
// the application takes it (get_request, with the peer's private data)
// and binds it to an idle queue pair of its session on the same engine
// (accept_request: the transport sends ACCEPT with the application's
// private data) or refuses it (reject_request: REJECT APPLICATION with
// its reason and private data). Until then the peer has no ACCEPT and
// sends nothing but CONNECT retries.
//
// A listener belongs to its engine goroutine like a queue pair; the
// session's request goroutine reaches it only through Engine.Do.
type listener struct {
	service uint32
	session *session
	e       *Engine
	backlog []*transport.Conn // arrived, not yet taken; cap fixed
	taken   map[uint64]*transport.Conn
	nextID  uint64
	arrived chan struct{} // cap 1: a request arrived
}

const defaultBacklog = 64

// enqueue takes a connection made to a listener's service (engine
// goroutine).
func (d *EngineDriver) enqueue(now transport.Time, l *listener, c *transport.Conn) {
	if len(l.backlog) == cap(l.backlog) {
		// Backlog full: REJECT LIMIT; the peer may try again later.
		d.gone[c] = true
		c.Reject(now, wire.ReasonLimit, 0, nil)
		return
	}
	l.backlog = append(l.backlog, c)
	d.waiting[c] = l
	select {
	case l.arrived <- struct{}{}:
	default:
	}
}

// requestClosed forgets a waiting request whose connection closed.
func (d *EngineDriver) requestClosed(l *listener, c *transport.Conn) {
	delete(d.waiting, c)
	for i, b := range l.backlog {
		if b == c {
			copy(l.backlog[i:], l.backlog[i+1:])
			l.backlog[len(l.backlog)-1] = nil
			l.backlog = l.backlog[:len(l.backlog)-1]
			return
		}
	}
	for id, t := range l.taken {
		if t == c {
			delete(l.taken, id)
			return
		}
	}
}

// closeListener stops l and closes the requests it holds (engine
// goroutine); it returns their connections for reaping.
func (d *EngineDriver) closeListener(now transport.Time, l *listener) []*transport.Conn {
	l.e.E.Endpoint().Unlisten(l.service)
	delete(d.listeners, l.service)
	var conns []*transport.Conn
	for _, c := range l.backlog {
		conns = append(conns, c)
	}
	for _, c := range l.taken {
		conns = append(conns, c)
	}
	for _, c := range conns {
		delete(d.waiting, c)
		closeRequest(now, d, c)
	}
	clear(l.backlog)
	l.backlog, l.taken = l.backlog[:0], map[uint64]*transport.Conn{}
	return conns
}

// closeRequest closes a request's connection; its last completions are
// dropped (gone).
func closeRequest(now transport.Time, d *EngineDriver, c *transport.Conn) {
	if st := c.State(); st == transport.StateEstablished || st == transport.StateConnecting || st == transport.StatePending {
		d.gone[c] = true
		c.Close(now)
	}
}

func (s *Server) listen(ctx context.Context, ss *session, req *proto.Request, resp *proto.Response) error {
	if req.Engine < 0 || req.Engine >= len(s.engines) {
		return proto.Errorf(proto.CodeNotFound, "engine %d: the daemon has %d", req.Engine, len(s.engines))
	}
	n := req.Backlog
	if n == 0 {
		n = defaultBacklog
	}
	if n < 1 || n > proto.MaxBacklog {
		return proto.Errorf(proto.CodeBadRequest, "backlog %d: want 1..%d", req.Backlog, proto.MaxBacklog)
	}
	l := s.limits.Load()
	s.mu.Lock()
	held := len(ss.qps) + len(ss.listeners)
	s.mu.Unlock()
	if l.MaxQPsPerSession > 0 && held >= l.MaxQPsPerSession {
		return proto.Errorf(proto.CodeLimit, "%d queue pairs and listeners, the session limit", held)
	}
	e := s.engines[req.Engine]
	var token uint64
	if !req.Public {
		if req.Service != 0 {
			// A peer with the token out of band can have a drawn number
			// with it, which a scan does not find: a chosen number is
			// for peers that know nothing else.
			return proto.Errorf(proto.CodeBadRequest,
				"service %d with a secret token: a listener at a chosen service is public (listen with public)", req.Service)
		}
		var err error
		if token, err = newToken(); err != nil {
			return proto.Errorf(proto.CodeInternal, "%v", err)
		}
	}
	service := req.Service
	if service == 0 {
		service = s.newQPN(e)
	} else if err := s.claimService(e, service); err != nil {
		return err
	}
	ln := &listener{service: service, session: ss, e: e, backlog: make([]*transport.Conn, 0, n),
		taken: map[uint64]*transport.Conn{}, arrived: make(chan struct{}, 1)}
	if err := e.E.Do(ctx, func(transport.Time) {
		e.D.listeners[service] = ln
		// The application decides each connection (get_request, then
		// accept_request or reject_request): the transport holds it
		// Pending meanwhile and answers only when it has.
		e.E.Endpoint().ListenWith(service, e.D.table(ss), transport.ListenOptions{Token: token, Defer: true})
	}); err != nil {
		s.freeQPN(service)
		return err
	}
	s.mu.Lock()
	ss.listeners[service] = ln
	s.mu.Unlock()
	resp.Service, resp.Local, resp.Token = service, e.Local.String(), token
	return nil
}

func (s *Server) lookupListener(ss *session, service uint32) (*listener, error) {
	l := ss.listeners[service]
	if l == nil {
		return nil, proto.Errorf(proto.CodeNotFound, "no listener %d in this session", service)
	}
	return l, nil
}

func (s *Server) getRequest(ctx context.Context, ss *session, req *proto.Request, resp *proto.Response) error {
	l, err := s.lookupListener(ss, req.Service)
	if err != nil {
		return err
	}
	// A negative timeout_ms looks without waiting: an event loop (the
	// libfabric provider's progress) asks between its other work instead
	// of parking its session's single request slot for a millisecond.
	poll := req.TimeoutMS < 0
	timeout := 30 * time.Second
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		var id uint64
		var peer netip.Addr
		var private []byte
		if err := l.e.E.Do(ctx, func(transport.Time) {
			for len(l.backlog) > 0 {
				c := l.backlog[0]
				copy(l.backlog, l.backlog[1:])
				l.backlog[len(l.backlog)-1] = nil
				l.backlog = l.backlog[:len(l.backlog)-1]
				if st := c.State(); st != transport.StatePending {
					continue
				}
				l.nextID++
				id, peer = l.nextID, c.Peer()
				private = append(private, c.PeerPrivate()...)
				l.taken[id] = c
				return
			}
		}); err != nil {
			return err
		}
		if id != 0 {
			resp.Request, resp.Peer, resp.Service, resp.Private = id, peer.String(), l.service, private
			return nil
		}
		if poll {
			return proto.Errorf(proto.CodeConnect, "no connection request waiting")
		}
		select {
		case <-l.arrived:
		case <-t.C:
			return proto.Errorf(proto.CodeConnect, "no connection request within %v", timeout)
		case <-ctx.Done():
			return proto.Errorf(proto.CodeConnect, "session ending")
		}
	}
}

// decide accepts (q != nil) or rejects a taken request.
func (s *Server) decide(ctx context.Context, ss *session, req *proto.Request, resp *proto.Response, accept bool) error {
	l, err := s.lookupListener(ss, req.Service)
	if err != nil {
		return err
	}
	if len(req.Private) > proto.MaxPrivate {
		return proto.Errorf(proto.CodeBadRequest, "%d bytes of private data: at most %d", len(req.Private), proto.MaxPrivate)
	}
	var q *qp
	if accept {
		var e *Engine
		if q, e, err = s.lookupQP(ss, req.QPN); err != nil {
			return err
		}
		if e != l.e {
			return proto.Errorf(proto.CodeBadRequest, "queue pair %d is on another engine than listener %d", req.QPN, l.service)
		}
	}
	var perr error
	if err := l.e.E.Do(ctx, func(now transport.Time) {
		c := l.taken[req.Request]
		if c == nil {
			perr = proto.Errorf(proto.CodeNotFound, "no request %d on listener %d (closed by its peer, or decided)", req.Request, l.service)
			return
		}
		d := l.e.D
		if !accept {
			delete(l.taken, req.Request)
			delete(d.waiting, c)
			d.gone[c] = true
			if err := c.Reject(now, wire.ReasonApplication, req.AppReason, req.Private); err != nil {
				perr = proto.Errorf(proto.CodeState, "request %d: %v", req.Request, err)
			}
			return
		}
		if q.state != qpIdle || q.conn != nil {
			perr = proto.Errorf(proto.CodeState, "queue pair %d is not idle", q.qpn)
			return
		}
		// The connection takes the accepting queue pair's RNR policy,
		// not the listener's (which has none).
		if err := c.AcceptWith(now, transport.AcceptOptions{Private: req.Private, RNRRetryForever: q.rnrForever}); err != nil {
			perr = proto.Errorf(proto.CodeNotFound, "request %d: %v (its peer gave up)", req.Request, err)
			delete(l.taken, req.Request)
			delete(d.waiting, c)
			return
		}
		delete(l.taken, req.Request)
		delete(d.waiting, c)
		q.conn, q.state, q.peer = c, qpConnected, c.Peer()
		d.byConn[c] = q
		d.wake(q)
		if d.byQPN[q.qpn] == q {
			delete(d.byQPN, q.qpn)
		}
		l.e.E.Endpoint().Unlisten(q.qpn)
		ss.conns[l.e] = append(ss.conns[l.e], c)
		q.event(proto.EventConnected, proto.StatusOK)
		resp.Peer = q.peer.String()
	}); err != nil {
		return err
	}
	return perr
}

func (s *Server) unlisten(ctx context.Context, ss *session, service uint32) error {
	l, err := s.lookupListener(ss, service)
	if err != nil {
		return err
	}
	if err := l.e.E.Do(ctx, func(now transport.Time) {
		ss.conns[l.e] = append(ss.conns[l.e], l.e.D.closeListener(now, l)...)
	}); err != nil {
		return err
	}
	s.mu.Lock()
	delete(ss.listeners, service)
	delete(s.qpns, service)
	s.mu.Unlock()
	return nil
}
