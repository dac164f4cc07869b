package control

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/transport"
)

// Engine is one engine the server places queue pairs on.
type Engine struct {
	E     *dataplane.Engine
	D     *EngineDriver
	Local netip.Addr
	Iface string
	// Mask and Tag are the engine's connection-id tag (transport.Config
	// IDMask, IDTag) when several engines share an interface: queue pair
	// numbers carry the tag too, so a peer's CONNECT for one is handed
	// to this engine whichever queue it arrived on (dataplane owner).
	Mask, Tag uint32
	engine    int
}

// Fallback answers requests whose operation the server does not know
// (the daemon's own operations: status, watch, expose). raw is the whole
// request. The reply is sent as returned (it should carry the request's
// V and Seq); a nil reply sends nothing. Before it, an operation may
// stream chunked values through conn (proto.Conn.SendChunked).
type Fallback func(ctx context.Context, cred proto.Cred, h proto.Header, raw []byte, conn *proto.Conn) (reply any, err error)

// Server serves sessions on the control socket.
type Server struct {
	limits   atomic.Pointer[config.Limits]
	log      *slog.Logger
	keys     *keys
	engines  []*Engine
	fallback Fallback

	mu       sync.Mutex
	sessions map[uint64]*session
	nextID   uint64
	nextCQ   uint32 // the last shared completion queue's number: numbers are daemon-wide, never reused while the daemon runs
	qpns     map[uint32]bool
	wg       sync.WaitGroup
}

// NewServer returns a server placing queue pairs on engines.
func NewServer(limits config.Limits, engines []*Engine, fallback Fallback, log *slog.Logger) *Server {
	s := &Server{log: log, keys: newKeys(), engines: engines, fallback: fallback,
		sessions: map[uint64]*session{}, qpns: map[uint32]bool{}}
	for i, e := range engines {
		e.engine = i
	}
	s.SetLimits(limits)
	return s
}

// SetLimits replaces the limits (SIGHUP); sessions are held to them from
// their next request on, and keep what they already have.
func (s *Server) SetLimits(l config.Limits) { s.limits.Store(&l) }

// Serve accepts sessions on ln until ctx ends or ln closes, then waits for
// the sessions it started to be reclaimed.
//
// An accept that fails for want of resources (EMFILE, ENFILE, ENOBUFS,
// ENOMEM: descriptors or memory run out, by this daemon's doing or the
// sessions') does not end it: it backs off (5 ms, doubling to 1 s) and
// tries again, so it accepts sessions again as soon as descriptors are
// freed. An episode is logged twice, when it starts and when it ends,
// with how many accepts failed; not once per failure.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var (
		failed  int // accepts failed in this episode
		since   time.Time
		backoff time.Duration
	)
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || !acceptCanRecover(err) {
				break
			}
			if failed == 0 {
				since = time.Now()
				s.log.Warn("control: accept failing for want of resources; retrying with backoff",
					"socket", ln.Addr().String(), "err", err)
			}
			failed++
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		if failed > 0 {
			s.log.Info("control: accepting sessions again", "socket", ln.Addr().String(),
				"failed_accepts", failed, "after", time.Since(since).Round(time.Millisecond))
			failed, backoff = 0, 0
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(ctx, c)
		}()
	}
	s.wg.Wait()
}

// acceptCanRecover reports whether an accept error is a shortage that
// freeing resources ends, rather than a closed or broken listener. (A
// connection aborted before it was accepted, ECONNABORTED, the net
// package retries itself.)
func acceptCanRecover(err error) bool {
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Listen makes the control socket at path: SOCK_SEQPACKET, mode and group
// from the configuration.
func Listen(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	os.Remove(path) // a stale socket of an earlier run
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("control socket: %w", err)
		}
	}
	return ln, nil
}

// Counts are daemon-wide totals over live sessions.
type Counts struct {
	Sessions, Regions, QPs int
	Bytes                  int64
}

// Counts returns the totals.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Counts{Sessions: len(s.sessions)}
	for _, ss := range s.sessions {
		c.Regions += len(ss.regions)
		c.QPs += len(ss.qps)
		c.Bytes += ss.bytes
	}
	return c
}

func (s *Server) serve(ctx context.Context, uc *net.UnixConn) {
	c := proto.NewConn(uc)
	defer c.Close()
	// The daemon stopping ends the session: the client sees its socket
	// close (ErrDaemonGone) instead of waiting on a daemon that is gone.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	cred, err := proto.PeerCred(uc)
	if err != nil {
		s.log.Warn("control: peer credentials", "err", err)
		return
	}
	ss, err := s.open(cred)
	if err != nil {
		c.Send(proto.Response{Header: proto.Header{V: proto.Version, Code: proto.CodeLimit, Error: err.Error()}})
		return
	}
	defer s.reclaim(ss)
	for {
		msg, files, err := c.Recv()
		if err != nil {
			if errors.Is(err, proto.ErrTruncated) {
				c.Send(proto.Response{Header: proto.Header{V: proto.Version, Code: proto.CodeBadRequest, Error: err.Error()}})
				continue
			}
			return
		}
		reply, fds, sent := s.handle(ctx, ss, msg, files, c)
		for _, f := range files {
			f.Close() // what the handler needed it has mapped or duplicated
		}
		if reply == nil {
			continue
		}
		err = c.Send(reply, fds...)
		if sent != nil {
			sent()
		}
		if err != nil {
			return
		}
	}
}

// handle answers one request; fds go with the reply, and sent (if not
// nil) runs once the reply has been sent or has failed.
func (s *Server) handle(ctx context.Context, ss *session, msg []byte, files []*os.File, conn *proto.Conn) (any, []int, func()) {
	var req proto.Request
	h, err := proto.Decode(msg, &req)
	fail := func(err error) proto.Response {
		r := proto.Response{Header: proto.Header{V: proto.Version, Seq: h.Seq, Code: proto.CodeInternal}}
		var pe *proto.Error
		r.Error = err.Error()
		if errors.As(err, &pe) {
			// The code travels in its own field: the message says the
			// rest once ("connect_failed: connect_failed: ..." otherwise).
			r.Code = pe.Code
			r.Error = strings.TrimPrefix(r.Error, string(pe.Code)+": ")
			r.Rejection = pe.Reject
		}
		return r
	}
	if err != nil {
		return fail(err), nil, nil
	}
	resp := proto.Response{Header: proto.Header{V: proto.Version, Seq: h.Seq, Code: proto.CodeOK}}
	var fds []int
	var sent func()
	switch h.Op {
	case proto.OpHello:
		l := s.limits.Load()
		resp.MaxRegions, resp.MaxRegionBytes, resp.MaxQPs = l.MaxRegionsPerSession, l.MaxRegionBytesPerSession, l.MaxQPsPerSession
		resp.SessionID = ss.id
		resp.MaxSGE = proto.MaxSGE
		for _, en := range s.engines {
			if cpu, ok := en.E.PinnedCPU(); ok && !slices.Contains(resp.EngineCPUs, cpu) {
				resp.EngineCPUs = append(resp.EngineCPUs, cpu)
			}
		}
	case proto.OpCreateCQ:
		fds, sent, err = s.createCQ(ctx, ss, &req, &resp)
	case proto.OpDestroyCQ:
		err = s.destroyCQ(ss, req.CQ)
	case proto.OpRegister:
		err = s.register(ctx, ss, &req, files, &resp)
	case proto.OpDeregMR:
		err = s.deregister(ctx, ss, req.Key)
	case proto.OpCreateQP:
		fds, sent, err = s.createQP(ctx, ss, &req, &resp)
	case proto.OpConnect:
		err = s.connect(ctx, ss, &req, &resp)
	case proto.OpAccept:
		err = s.accept(ctx, ss, &req, &resp)
	case proto.OpDestroyQP:
		err = s.destroyQP(ctx, ss, req.QPN)
	case proto.OpQueryQP:
		err = s.queryQP(ctx, ss, req.QPN, &resp)
	case proto.OpListen:
		err = s.listen(ctx, ss, &req, &resp)
	case proto.OpGetRequest:
		err = s.getRequest(ctx, ss, &req, &resp)
	case proto.OpAcceptRequest:
		err = s.decide(ctx, ss, &req, &resp, true)
	case proto.OpRejectRequest:
		err = s.decide(ctx, ss, &req, &resp, false)
	case proto.OpUnlisten:
		err = s.unlisten(ctx, ss, req.Service)
	case proto.OpSession:
		s.mu.Lock()
		resp.Regions, resp.QPs, resp.Bytes = len(ss.regions), len(ss.qps), ss.bytes
		s.mu.Unlock()
	case proto.OpSessions:
		c := s.Counts()
		resp.Sessions, resp.Regions, resp.QPs, resp.Bytes = c.Sessions, c.Regions, c.QPs, c.Bytes
	default:
		if s.fallback == nil {
			return fail(proto.Errorf(proto.CodeUnknownOp, "unknown operation %q", h.Op)), nil, nil
		}
		reply, err := s.fallback(ctx, ss.cred, h, msg, conn)
		if err != nil {
			return fail(err), nil, nil
		}
		return reply, nil, nil
	}
	if err != nil {
		if sent != nil {
			sent()
		}
		return fail(err), nil, nil
	}
	return resp, fds, sent
}

// session is one application's protection domain. Its request goroutine
// is the only writer of its maps; s.mu guards them against Counts.
type session struct {
	id      uint64
	cred    proto.Cred
	regions map[uint32]*region
	retired []*region // deregistered, unmapped when the session ends
	bytes   int64
	qps     map[uint32]*qp
	engine  map[uint32]*Engine // queue pair -> its engine
	cqs     map[uint32]*cq     // shared completion queues (cq.go)
	// listeners by service (listener.go)
	listeners map[uint32]*listener
	// conns holds every connection its queue pairs made, by engine;
	// appended and read only inside that engine's Do.
	conns map[*Engine][]*transport.Conn
	// use is the session's share of the daemon's budget (budget.go),
	// guarded by the budget's lock; its regions and queue pairs give
	// back what they took, maybe after the session has gone.
	use usage
}

func (s *Server) open(cred proto.Cred) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.limits.Load(); l.MaxSessions > 0 && len(s.sessions) >= l.MaxSessions {
		return nil, fmt.Errorf("%d sessions, the limit", len(s.sessions))
	}
	s.nextID++
	ss := &session{id: s.nextID, cred: cred, regions: map[uint32]*region{}, qps: map[uint32]*qp{},
		engine: map[uint32]*Engine{}, cqs: map[uint32]*cq{}, conns: map[*Engine][]*transport.Conn{}, listeners: map[uint32]*listener{}}
	s.sessions[ss.id] = ss
	return ss, nil
}

func (s *Server) register(ctx context.Context, ss *session, req *proto.Request, files []*os.File, resp *proto.Response) error {
	if len(files) != 1 {
		return proto.Errorf(proto.CodeBadRequest, "reg_mr takes one memfd, got %d descriptors", len(files))
	}
	l := s.limits.Load()
	s.mu.Lock()
	n, b := len(ss.regions), ss.bytes
	s.mu.Unlock()
	if l.MaxRegionsPerSession > 0 && n >= l.MaxRegionsPerSession {
		return proto.Errorf(proto.CodeLimit, "%d regions, the session limit", n)
	}
	if l.MaxRegionBytesPerSession > 0 && (req.Length > uint64(l.MaxRegionBytesPerSession) || b+int64(req.Length) > l.MaxRegionBytesPerSession) {
		return proto.Errorf(proto.CodeLimit, "%d more bytes over the session's %d (%d held)", req.Length, l.MaxRegionBytesPerSession, b)
	}
	if req.Addr+req.Length < req.Addr {
		return proto.Errorf(proto.CodeBadRequest, "address range wraps")
	}
	r, err := mapRegion(files[0], req.Offset, req.Length, req.Access, &ss.use)
	if err != nil {
		return err
	}
	key, err := s.keys.get()
	if err != nil {
		r.unmap()
		return err
	}
	r.key, r.tr.Key, r.tr.Addr = key, key, req.Addr
	r.refs.Store(int32(len(s.engines)))
	for _, e := range s.engines {
		if err := e.E.Do(ctx, func(transport.Time) { e.D.table(ss).Add(&r.tr) }); err != nil {
			return err // shutting down: the process unmaps everything
		}
	}
	s.mu.Lock()
	ss.regions[key] = r
	ss.bytes += int64(r.length)
	s.mu.Unlock()
	resp.Key = key
	return nil
}

func (s *Server) deregister(ctx context.Context, ss *session, key uint32) error {
	r := ss.regions[key]
	if r == nil {
		return proto.Errorf(proto.CodeNotFound, "no region with key %#x in this session", key)
	}
	for _, e := range s.engines {
		if err := e.E.Do(ctx, func(transport.Time) { e.D.table(ss).Remove(key) }); err != nil {
			return err
		}
	}
	// From here no packet finds the key. Requests already posted may
	// still read or write the pages, so the mapping stays until the
	// session ends (and its bytes still count).
	s.keys.put(key)
	s.mu.Lock()
	delete(ss.regions, key)
	ss.retired = append(ss.retired, r)
	s.mu.Unlock()
	return nil
}

// newQPN draws a queue pair number no live queue pair or listener has,
// with e's tag in its low bits. Random, so a number seen once says nothing
// about the next (they are the services a peer may connect to); at least
// proto.MinDrawn, so never a port number a listener may ask for
// (claimService); at most proto.MaxService, so never a service the daemon
// listens on for itself (the compliance suite's, "cmpl" and "cmpm", are
// above it).
func (s *Server) newQPN(e *Engine) uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		n := rand.Uint32()&proto.MaxService&^e.Mask | e.Tag
		if n >= proto.MinDrawn && !s.qpns[n] {
			s.qpns[n] = true
			return n
		}
	}
}

// claimService takes n, a number the application chose, for a listener
// on e, or says why it cannot have it. The number must be one the daemon
// could have drawn for e, bar the floor: in 1..proto.MaxService, and with
// e's tag in its low bits, since a CONNECT for it is handed to the
// engine whose tag it carries (dataplane's owner), which is the one
// holding its listener only if the tag is e's. Numbers are daemon-wide:
// one held by any session's queue pair or listener is taken.
func (s *Server) claimService(e *Engine, n uint32) error {
	if n == 0 || n > proto.MaxService {
		return proto.Errorf(proto.CodeBadRequest, "service %d: want 1..%d", n, proto.MaxService)
	}
	if n&e.Mask != e.Tag {
		to := "no engine"
		for _, o := range s.engines {
			if o.Mask == e.Mask && o.Tag == n&e.Mask {
				to = fmt.Sprintf("engine %d", o.engine)
			}
		}
		return proto.Errorf(proto.CodeBadRequest,
			"service %d does not carry engine %d's tag: a CONNECT for it goes to %s (want service & %#x == %#x)",
			n, e.engine, to, e.Mask, e.Tag)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.qpns[n] {
		return proto.Errorf(proto.CodeBusy, "service %d is in use on this daemon", n)
	}
	s.qpns[n] = true
	return nil
}

func slotsOr(v, def int) (int, error) {
	if v == 0 {
		return def, nil
	}
	if v < 2 || v > MaxQueueSlots || v&(v-1) != 0 {
		return 0, proto.Errorf(proto.CodeBadRequest, "%d slots: want a power of two in 2..%d", v, MaxQueueSlots)
	}
	return v, nil
}

// createQP makes a queue pair and returns the descriptors for the reply
// (send queue, completion queue, the application's end of the doorbell)
// and what to run once the reply has gone (close the daemon's copy of
// that end).
func (s *Server) createQP(ctx context.Context, ss *session, req *proto.Request, resp *proto.Response) ([]int, func(), error) {
	l := s.limits.Load()
	s.mu.Lock()
	n := len(ss.qps)
	s.mu.Unlock()
	if l.MaxQPsPerSession > 0 && n >= l.MaxQPsPerSession {
		return nil, nil, proto.Errorf(proto.CodeLimit, "%d queue pairs, the session limit", n)
	}
	if req.Engine < 0 || req.Engine >= len(s.engines) {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "engine %d: the daemon has %d", req.Engine, len(s.engines))
	}
	sqn, err := slotsOr(req.SQSlots, DefaultSQSlots)
	if err != nil {
		return nil, nil, err
	}
	cqn, err := slotsOr(req.CQSlots, DefaultCQSlots)
	if err != nil {
		return nil, nil, err
	}
	e := s.engines[req.Engine]
	var shared *cq
	if req.CQ != 0 {
		// A shared CQ's producer is its engine: the queue pair goes there.
		if shared = ss.cqs[req.CQ]; shared == nil {
			return nil, nil, proto.Errorf(proto.CodeNotFound, "no completion queue %d in this session", req.CQ)
		}
		if req.Engine != 0 && s.engines[req.Engine] != shared.engine {
			return nil, nil, proto.Errorf(proto.CodeBadRequest, "engine %d: completion queue %d is on engine %d, and its queue pairs must be",
				req.Engine, req.CQ, shared.engine.engine)
		}
		if req.CQSlots != 0 {
			return nil, nil, proto.Errorf(proto.CodeBadRequest, "cq_slots with a shared completion queue: its size is create_cq's")
		}
		e = shared.engine
	}
	token, err := newToken()
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	qpn := s.newQPN(e)
	q, err := newQP(qpn, ss, sqn, cqn, shared)
	if err != nil {
		s.freeQPN(qpn)
		var pe *proto.Error
		if errors.As(err, &pe) {
			return nil, nil, err // the daemon's budget: a limit, named
		}
		return nil, nil, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	q.events = req.Events
	q.rnrForever = req.RNRRetryForever
	var maxPayload int
	var aerr error
	if err := e.E.Do(ctx, func(transport.Time) {
		ep := e.E.Endpoint()
		q.mem = e.D.table(ss)
		if aerr = e.D.add(q); aerr != nil {
			return
		}
		e.D.byQPN[qpn] = q
		// A waiting queue pair takes only a peer that has its token
		// (spec §7.3): a scan can neither find nor claim it. The
		// connection it takes there is made with its RNR policy.
		ep.ListenWith(qpn, q.mem, transport.ListenOptions{Token: token, RNRRetryForever: q.rnrForever})
		maxPayload = ep.Config().MaxPayload()
	}); err != nil || aerr != nil {
		q.close()
		s.freeQPN(qpn)
		if aerr != nil {
			return nil, nil, proto.Errorf(proto.CodeInternal, "%v", aerr)
		}
		return nil, nil, err
	}
	s.mu.Lock()
	ss.qps[qpn] = q
	ss.engine[qpn] = e
	s.mu.Unlock()
	resp.QPN, resp.Local, resp.MaxPayload, resp.Token = qpn, e.Local.String(), maxPayload, token
	if shared != nil {
		shared.users++
		resp.CQ = shared.id
		return []int{q.sq.FD(), q.appBell.FD()}, q.handOver, nil
	}
	return []int{q.sq.FD(), q.cq.ring.FD(), q.appBell.FD()}, q.handOver, nil
}

// createCQ makes a shared completion queue on an engine and returns the
// descriptors for the reply (its ring, the application's end of its
// doorbell) and what to run once the reply has gone. Its number is
// daemon-wide, so a session naming another's finds nothing.
func (s *Server) createCQ(ctx context.Context, ss *session, req *proto.Request, resp *proto.Response) ([]int, func(), error) {
	if l := s.limits.Load(); l.MaxQPsPerSession > 0 && len(ss.cqs) >= l.MaxQPsPerSession {
		return nil, nil, proto.Errorf(proto.CodeLimit, "%d completion queues, the session limit (max_qps_per_session bounds them too)", len(ss.cqs))
	}
	if req.Engine < 0 || req.Engine >= len(s.engines) {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "engine %d: the daemon has %d", req.Engine, len(s.engines))
	}
	slots, err := slotsOr(req.CQSlots, DefaultCQSlots)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.nextCQ++
	id := s.nextCQ
	s.mu.Unlock()
	c, err := newSharedCQ(id, ss, s.engines[req.Engine], slots)
	if err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) {
			return nil, nil, err
		}
		return nil, nil, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	s.mu.Lock()
	ss.cqs[id] = c
	s.mu.Unlock()
	resp.CQ, resp.Local = id, s.engines[req.Engine].Local.String()
	return []int{c.ring.FD(), c.appBell.FD()}, c.handOver, nil
}

// destroyCQ frees a shared completion queue, refusing while a queue pair
// still completes into it (destroy those first, as verbs refuses
// ibv_destroy_cq with EBUSY).
func (s *Server) destroyCQ(ss *session, id uint32) error {
	c := ss.cqs[id]
	if c == nil {
		return proto.Errorf(proto.CodeNotFound, "no completion queue %d in this session", id)
	}
	if c.users > 0 {
		return proto.Errorf(proto.CodeBusy, "completion queue %d is in use by %d queue pairs: destroy them first", id, c.users)
	}
	c.close()
	s.mu.Lock()
	delete(ss.cqs, id)
	s.mu.Unlock()
	return nil
}

// newToken draws a service token (spec §7.3): 64 bits from crypto/rand,
// never 0 (which would make the service public).
func newToken() (uint64, error) {
	var b [8]byte
	for {
		if _, err := crand.Read(b[:]); err != nil {
			return 0, err
		}
		if t := binary.LittleEndian.Uint64(b[:]); t != 0 {
			return t, nil
		}
	}
}

func (s *Server) freeQPN(n uint32) {
	s.mu.Lock()
	delete(s.qpns, n)
	s.mu.Unlock()
}

func (s *Server) lookupQP(ss *session, qpn uint32) (*qp, *Engine, error) {
	q := ss.qps[qpn]
	if q == nil {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "no queue pair %d in this session", qpn)
	}
	return q, ss.engine[qpn], nil
}

// waitFor waits for a connect or accept to be signalled, or for timeout;
// on timeout, undo runs on the engine and its answer decides (the signal
// may have raced the timeout).
func (s *Server) waitFor(ctx context.Context, e *Engine, ch chan error, timeout time.Duration, undo func(now transport.Time) bool) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
	case <-ctx.Done():
	}
	var undone bool
	if err := e.E.Do(context.Background(), func(now transport.Time) { undone = undo(now) }); err != nil {
		return err
	}
	if !undone {
		return <-ch // signalled meanwhile: the answer is in the channel
	}
	return proto.Errorf(proto.CodeConnect, "timed out after %v", timeout)
}

func (s *Server) connect(ctx context.Context, ss *session, req *proto.Request, resp *proto.Response) error {
	q, e, err := s.lookupQP(ss, req.QPN)
	if err != nil {
		return err
	}
	peer, err := netip.ParseAddr(req.Peer)
	if err != nil {
		return proto.Errorf(proto.CodeBadRequest, "peer %q: %v", req.Peer, err)
	}
	if len(req.Private) > proto.MaxPrivate {
		return proto.Errorf(proto.CodeBadRequest, "%d bytes of private data: at most %d", len(req.Private), proto.MaxPrivate)
	}
	// With a timeout (the caller's context), a CONNECT that no one
	// answered is tried again on the transport's retransmission schedule
	// (§7.3) past its retry count, until the time is up: a peer that
	// starts late is still reached. Refusals and resets are final.
	var deadline time.Time
	if req.TimeoutMS > 0 {
		deadline = time.Now().Add(time.Duration(req.TimeoutMS) * time.Millisecond)
	}
	if req.NoWait {
		return s.connectNoWait(ctx, ss, e, q, peer, req, deadline, resp)
	}
	for attempt := 1; ; attempt++ {
		ch := make(chan error, 1)
		var perr error
		if err := e.E.Do(ctx, func(now transport.Time) {
			perr = s.startConnect(now, ss, e, q, peer, req, ch, attempt > 1)
			if perr == nil && !deadline.IsZero() {
				// One connection until the deadline: a fresh one per
				// try raced the listener's ACCEPT of the one before (its
				// RESET closed the listener; the next try drew
				// REJECT no_service).
				q.conn.ConnectUntil(now + transport.Time(time.Until(deadline)))
			}
		}); err != nil {
			return err
		}
		if perr != nil {
			return perr
		}
		// Without a deadline the transport's verdict ends the attempt;
		// the guard only bounds a wait the transport never answered.
		wait := connectGuard
		if !deadline.IsZero() {
			wait = max(time.Millisecond, time.Until(deadline))
		}
		timedOut := false
		err = s.waitFor(ctx, e, ch, wait, func(now transport.Time) bool {
			if q.waiter == nil {
				return false
			}
			q.waiter, timedOut = nil, true
			q.conn.Close(now)
			q.state, q.reason = qpClosed, proto.StatusRetryExceeded
			e.D.wake(q) // what it posts from now on fails
			return true
		})
		if err == nil {
			resp.QPN, resp.Peer = q.qpn, peer.String()
			_ = e.E.Do(context.Background(), func(transport.Time) {
				resp.Private = append(proto.Hex(nil), q.conn.PeerPrivate()...)
			})
			return nil
		}
		again := false
		_ = e.E.Do(context.Background(), func(transport.Time) {
			again = q.state == qpClosed && q.reason == proto.StatusRetryExceeded && q.waiter == nil &&
				!deadline.IsZero() && time.Until(deadline) > 0 && ctx.Err() == nil
			if !again && q.state == qpClosed {
				q.event(connectFailedEvent(q.reason), q.reason)
			}
		})
		if !again {
			if timedOut && ctx.Err() == nil {
				err = proto.Errorf(proto.CodeConnect, "no answer from %v to CONNECT for queue pair %d within %v",
					peer, req.RemoteQPN, time.Duration(req.TimeoutMS)*time.Millisecond)
			}
			if attempt > 1 {
				return fmt.Errorf("%w (%d attempts)", err, attempt)
			}
			return err
		}
	}
}

// connectGuard bounds a connect wait without a deadline; the transport's
// CONNECT retries end it long before.
const connectGuard = 30 * time.Second

// connectNoWait starts q's connection as connect does and answers at once
// (connect's nowait). Nothing waits for the connection afterwards, no
// goroutine, no channel, no timer of the daemon's: the transport's
// CONNECT schedule, carried on to the deadline if there is one
// (ConnectUntil), is what ends an unanswered attempt, and the driver
// reports the outcome in q's completion queue when the transport does
// (EngineDriver.Completion: the event connected, or the failure event a
// waiting connect posts when it gives up). A destroy_qp or the session's
// end meanwhile closes the connection and forgets the queue pair
// (detach), and its last completions with it. So the outcome needs an
// event to go in: a queue pair made without events is refused.
func (s *Server) connectNoWait(ctx context.Context, ss *session, e *Engine, q *qp, peer netip.Addr, req *proto.Request,
	deadline time.Time, resp *proto.Response) error {
	if !q.events {
		return proto.Errorf(proto.CodeBadRequest,
			"nowait connect of queue pair %d, made without events: its outcome is reported only as a connection event (create_qp with events)", q.qpn)
	}
	var perr error
	if err := e.E.Do(ctx, func(now transport.Time) {
		if perr = s.startConnect(now, ss, e, q, peer, req, nil, false); perr != nil {
			return
		}
		q.nowait = true
		if !deadline.IsZero() {
			q.conn.ConnectUntil(now + transport.Time(time.Until(deadline)))
		}
	}); err != nil {
		return err
	}
	if perr != nil {
		return perr // nothing was sent: no event follows
	}
	resp.QPN, resp.Peer = q.qpn, peer.String()
	return nil
}

// connectFailedEvent is the event of a connect that failed for reason: no
// answer (the CONNECTs went unanswered to the end) or any other failure
// (a REJECT, a RESET).
func connectFailedEvent(reason proto.CQStatus) proto.QPEvent {
	if reason == proto.StatusRetryExceeded {
		return proto.EventRetryExceeded
	}
	return proto.EventFailed
}

// startConnect sends a CONNECT for q (engine goroutine): from an idle
// queue pair, or, with retry, one whose previous attempt went unanswered.
func (s *Server) startConnect(now transport.Time, ss *session, e *Engine, q *qp, peer netip.Addr, req *proto.Request, ch chan error, retry bool) error {
	if q.state != qpIdle && !(retry && q.state == qpClosed && q.reason == proto.StatusRetryExceeded) {
		return proto.Errorf(proto.CodeState, "queue pair %d is not idle", q.qpn)
	}
	ep := e.E.Endpoint()
	c, err := ep.ConnectWith(now, peer, req.RemoteQPN, q.mem,
		transport.ConnectOptions{Token: req.Token, Private: req.Private, RNRRetryForever: q.rnrForever})
	if err != nil {
		return proto.Errorf(proto.CodeConnect, "%v", err)
	}
	ep.Unlisten(q.qpn)
	delete(e.D.byQPN, q.qpn)
	q.conn, q.state, q.waiter, q.reason = c, qpConnecting, ch, proto.StatusOK
	e.D.byConn[c] = q
	ss.conns[e] = append(ss.conns[e], c)
	return nil
}

func (s *Server) accept(ctx context.Context, ss *session, req *proto.Request, resp *proto.Response) error {
	q, e, err := s.lookupQP(ss, req.QPN)
	if err != nil {
		return err
	}
	ch := make(chan error, 1)
	var perr error
	var done bool
	if err := e.E.Do(ctx, func(transport.Time) {
		switch q.state {
		case qpConnected:
			done = true
			resp.Peer = q.peer.String()
		case qpIdle:
			q.waiter = ch
		default:
			perr = proto.Errorf(proto.CodeState, "queue pair %d is connecting or closed", q.qpn)
		}
	}); err != nil {
		return err
	}
	if perr != nil || done {
		return perr
	}
	timeout := 30 * time.Second
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	err = s.waitFor(ctx, e, ch, timeout, func(transport.Time) bool {
		if q.waiter == nil {
			return false
		}
		q.waiter = nil
		return true
	})
	if err == nil {
		_ = e.E.Do(ctx, func(transport.Time) {
			resp.Peer = q.peer.String()
			ss.conns[e] = append(ss.conns[e], q.conn)
		})
	}
	return err
}

// queryQP answers a queue pair's state, peer and closing reason (read on
// its engine, which owns them).
func (s *Server) queryQP(ctx context.Context, ss *session, qpn uint32, resp *proto.Response) error {
	q, e, err := s.lookupQP(ss, qpn)
	if err != nil {
		return err
	}
	return e.E.Do(ctx, func(transport.Time) {
		resp.QPN, resp.State = q.qpn, q.stateName()
		if q.peer.IsValid() {
			resp.Peer = q.peer.String()
		}
		if q.state == qpClosed {
			resp.Reason = proto.StatusName(q.reason)
		}
	})
}

func (s *Server) destroyQP(ctx context.Context, ss *session, qpn uint32) error {
	q, e, err := s.lookupQP(ss, qpn)
	if err != nil {
		return err
	}
	if err := e.E.Do(ctx, func(now transport.Time) { e.D.detach(now, q) }); err != nil {
		return err
	}
	q.close()
	if !q.ownCQ {
		q.cq.users--
	}
	s.mu.Lock()
	delete(ss.qps, qpn)
	delete(ss.engine, qpn)
	delete(s.qpns, qpn)
	s.mu.Unlock()
	return nil
}

// detach closes q's connection and forgets q (engine goroutine). The
// connection's remaining completions are dropped.
func (d *EngineDriver) detach(now transport.Time, q *qp) {
	if q.conn != nil {
		if st := q.conn.State(); st != transport.StateClosed && st != transport.StateFailed {
			d.gone[q.conn] = true
			q.conn.Close(now)
		}
		delete(d.byConn, q.conn)
	}
	if q.waiter != nil {
		q.signal(proto.Errorf(proto.CodeState, "queue pair destroyed"))
	}
	if d.byQPN[q.qpn] == q {
		delete(d.byQPN, q.qpn)
	}
	// Its completions are dropped from here on: what it owed no longer
	// holds room in a CQ it shares.
	q.owe(-q.outstanding)
	d.remove(q)
}

// reclaim frees everything a session held: its socket has closed.
func (s *Server) reclaim(ss *session) {
	var regions []*region
	for _, r := range ss.regions {
		regions = append(regions, r)
	}
	regions = append(regions, ss.retired...)
	for _, e := range s.engines {
		err := e.E.Do(context.Background(), func(now transport.Time) {
			var conns []*transport.Conn
			for qpn, q := range ss.qps {
				if ss.engine[qpn] != e {
					continue
				}
				if q.conn != nil {
					conns = append(conns, q.conn)
				}
				e.D.detach(now, q)
				e.E.Endpoint().Unlisten(qpn)
			}
			for _, l := range ss.listeners {
				if l.e == e {
					conns = append(conns, e.D.closeListener(now, l)...)
				}
			}
			for _, c := range ss.conns[e] {
				if c.State() != transport.StateClosed && c.State() != transport.StateFailed {
					conns = append(conns, c)
				}
			}
			if t := e.D.tables[ss]; t != nil {
				for _, r := range regions {
					t.Remove(r.key) // no packet finds them from here on
				}
				delete(e.D.tables, ss)
			}
			e.D.reap = append(e.D.reap, reaping{conns: conns, regions: regions})
		})
		if err != nil {
			// The engine has stopped: the daemon is exiting and the
			// process's end unmaps everything.
			return
		}
	}
	for _, q := range ss.qps {
		q.close()
	}
	for _, c := range ss.cqs {
		c.close()
	}
	for _, r := range ss.regions {
		s.keys.put(r.key)
	}
	s.mu.Lock()
	for qpn := range ss.qps {
		delete(s.qpns, qpn)
	}
	for service := range ss.listeners {
		delete(s.qpns, service)
	}
	delete(s.sessions, ss.id)
	s.mu.Unlock()
}
