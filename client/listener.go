package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/control/proto"
)

// Listener is a service that takes many connections (rdma_listen,
// libfabric's passive endpoint): peers connect to Service on Local with
// QP.Connect as to a queue pair, and each connection waits as a
// ConnRequest until the application accepts it onto a fresh queue pair
// or rejects it. A Listener is safe for concurrent use like its Client
// (each call is one request on the session).
//
// The transport holds each connection Pending until the application
// decides (docs/spec.md §7.3): the connecting side's Connect returns when
// the application accepts, with the private data it gave Accept, or
// fails with a *RejectedError carrying the reason and private data it
// gave Reject. A connecting side must present the listener's Token,
// unless the listener is public; without it the connect fails exactly as
// if nothing listened there, so a scan cannot find the listener.
type Listener struct {
	c       *Client
	Service uint32     // what peers connect to (their remote queue pair number)
	Token   uint64     // what their Connect must carry (0: a public listener)
	Local   netip.Addr // the engine's address
}

// ListenOptions shape a listener (zero: the daemon's defaults).
type ListenOptions struct {
	Engine  int // the engine its connections' queue pairs must be on
	Backlog int // requests that may wait (0: 64); more are refused (REJECT LIMIT)
	// Public makes a listener that needs no token (Token 0): anyone who
	// knows the service number may connect, as to a TCP port, and a scan
	// of numbers finds it. The default is a secret token.
	Public bool
	// Service, if not 0, is the number to listen at instead of one the
	// daemon draws (a port number, say, for peers that know only the
	// address and the port). It must be Public, in 1..2^24-1, carry the
	// engine's tag (no constraint on a daemon with one engine per
	// interface) and be free: the daemon refuses it otherwise
	// (ErrBadRequest, or ErrBusy when a queue pair or listener of any
	// session holds it). docs/api.md, Listeners, has the rule.
	Service uint32
}

// Listen makes a listener.
func (c *Client) Listen(o ListenOptions) (*Listener, error) {
	var r proto.Response
	if _, err := c.do(proto.Request{Header: proto.Header{Op: proto.OpListen}, Engine: o.Engine, Backlog: o.Backlog,
		Public: o.Public, Service: o.Service}, &r); err != nil {
		return nil, err
	}
	l := &Listener{c: c, Service: r.Service, Token: r.Token}
	l.Local, _ = netip.ParseAddr(r.Local)
	if o.Service != 0 && (r.Service != o.Service || r.Token != 0) {
		// A daemon that predates chosen services drew a number of its
		// own, which no peer knows.
		l.Close()
		return nil, fmt.Errorf("%w: listen at service %d: the daemon answered service %d, token %#x", ErrDaemonError,
			o.Service, r.Service, r.Token)
	}
	return l, nil
}

// ConnRequest is a connection waiting for the application's decision.
type ConnRequest struct {
	l    *Listener
	id   uint64
	Peer netip.Addr
	// Private is the private data of the peer's connect.
	Private []byte
}

// GetRequest waits for the next connection request (rdma_get_cm_event's
// CONNECT_REQUEST, fi_eq_read's FI_CONNREQ).
func (l *Listener) GetRequest(ctx context.Context) (*ConnRequest, error) {
	for {
		// Short waits keep the session's request loop responsive.
		req := proto.Request{Header: proto.Header{Op: proto.OpGetRequest}, Service: l.Service, TimeoutMS: 200}
		if d, ok := ctx.Deadline(); ok {
			req.TimeoutMS = max(1, min(200, int(time.Until(d)/time.Millisecond)))
		}
		var r proto.Response
		_, err := l.c.do(req, &r)
		if err == nil {
			return l.request(&r)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, ErrConnect) {
			return nil, err
		}
	}
}

// PollRequest takes the next connection request if one is waiting and
// returns nil, nil if none is, without waiting (get_request with a
// negative timeout_ms): for an event loop that looks between other work.
func (l *Listener) PollRequest() (*ConnRequest, error) {
	var r proto.Response
	_, err := l.c.do(proto.Request{Header: proto.Header{Op: proto.OpGetRequest}, Service: l.Service, TimeoutMS: -1}, &r)
	if errors.Is(err, ErrConnect) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return l.request(&r)
}

// request is the connection request a get_request answer describes.
func (l *Listener) request(r *proto.Response) (*ConnRequest, error) {
	p, err := netip.ParseAddr(r.Peer)
	if err != nil {
		return nil, fmt.Errorf("%w: get_request: peer %q", ErrDaemonError, r.Peer)
	}
	return &ConnRequest{l: l, id: r.Request, Peer: p, Private: r.Private}, nil
}

// Accept binds the request's connection to q, an idle queue pair of the
// same session and engine, and sends the peer ACCEPT with private (at
// most MaxPrivate bytes; nil for none): q is connected to the peer when
// it returns, and reports EventConnected.
func (r *ConnRequest) Accept(q *QP, private []byte) error {
	var resp proto.Response
	_, err := r.l.c.do(proto.Request{Header: proto.Header{Op: proto.OpAcceptRequest}, Service: r.l.Service,
		Request: r.id, QPN: q.Num, Private: private}, &resp)
	if err == nil {
		q.state = QPConnected
	}
	return err
}

// Reject refuses the request: the peer's connect fails with a
// *RejectedError of Reason "application" carrying reason and private (at
// most MaxPrivate bytes).
func (r *ConnRequest) Reject(reason uint16, private []byte) error {
	var resp proto.Response
	_, err := r.l.c.do(proto.Request{Header: proto.Header{Op: proto.OpRejectRequest}, Service: r.l.Service, Request: r.id,
		AppReason: reason, Private: private}, &resp)
	return err
}

// Close stops the listener and closes the requests still waiting in it.
func (l *Listener) Close() error {
	var r proto.Response
	_, err := l.c.do(proto.Request{Header: proto.Header{Op: proto.OpUnlisten}, Service: l.Service}, &r)
	return err
}
