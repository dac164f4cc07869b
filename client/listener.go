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
// The daemon's transport accepted the connection at the handshake, so
// the connecting side's Connect returns before the application decides;
// a rejected connection then closes (the peer sees EventPeerClosed), and
// completions the peer's requests cause before the accept (its WRITEs
// with immediate) are not reported. Connection private data and a
// REJECT with the application's reason need a wire change (not yet).
type Listener struct {
	c       *Client
	Service uint32     // what peers connect to (their remote queue pair number)
	Local   netip.Addr // the engine's address
}

// ListenOptions shape a listener (zero: the daemon's defaults).
type ListenOptions struct {
	Engine  int // the engine its connections' queue pairs must be on
	Backlog int // requests that may wait (0: 64); more are closed at once
}

// Listen makes a listener.
func (c *Client) Listen(o ListenOptions) (*Listener, error) {
	var r proto.Response
	if _, err := c.do(proto.Request{Header: proto.Header{Op: proto.OpListen}, Engine: o.Engine, Backlog: o.Backlog}, &r); err != nil {
		return nil, err
	}
	l := &Listener{c: c, Service: r.Service}
	l.Local, _ = netip.ParseAddr(r.Local)
	return l, nil
}

// ConnRequest is a connection waiting for the application's decision.
type ConnRequest struct {
	l    *Listener
	id   uint64
	Peer netip.Addr
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
			p, perr := netip.ParseAddr(r.Peer)
			if perr != nil {
				return nil, fmt.Errorf("%w: get_request: peer %q", ErrDaemonError, r.Peer)
			}
			return &ConnRequest{l: l, id: r.Request, Peer: p}, nil
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
	p, perr := netip.ParseAddr(r.Peer)
	if perr != nil {
		return nil, fmt.Errorf("%w: get_request: peer %q", ErrDaemonError, r.Peer)
	}
	return &ConnRequest{l: l, id: r.Request, Peer: p}, nil
}

// Accept binds the request's connection to q, an idle queue pair of the
// same session and engine: q is connected to the peer when it returns,
// and reports EventConnected.
func (r *ConnRequest) Accept(q *QP) error {
	var resp proto.Response
	_, err := r.l.c.do(proto.Request{Header: proto.Header{Op: proto.OpAcceptRequest}, Service: r.l.Service,
		Request: r.id, QPN: q.Num}, &resp)
	if err == nil {
		q.state = QPConnected
	}
	return err
}

// Reject closes the request's connection.
func (r *ConnRequest) Reject() error {
	var resp proto.Response
	_, err := r.l.c.do(proto.Request{Header: proto.Header{Op: proto.OpRejectRequest}, Service: r.l.Service, Request: r.id}, &resp)
	return err
}

// Close stops the listener and closes the requests still waiting in it.
func (l *Listener) Close() error {
	var r proto.Response
	_, err := l.c.do(proto.Request{Header: proto.Header{Op: proto.OpUnlisten}, Service: l.Service}, &r)
	return err
}
