// Package client is the library an application links to use metaroced:
// register memory, create queue pairs, connect them to remote queue pairs,
// post RDMA WRITE, READ, SEND and RECV, and poll or wait for completions.
//
// Set-up goes over the daemon's control socket (control/proto); the data
// path does not: a queue pair's send queue and completion queue are
// shared-memory rings (ring/) that the daemon's engine serves directly, so
// posting a work request is a few stores and one atomic publish, and a
// syscall only when the engine sleeps and must be woken (the ring's
// need-wakeup protocol). Waiting for a completion (WaitCQ) polls the
// completion queue, yielding the CPU between looks, for a bounded time
// (QPOptions.Spin, SpinBeforeSleep) and only then sleeps on the queue
// pair's doorbell, so a completion due within a round trip is picked up
// within a microsecond or so of its arrival, with no wake-up to pay, and an
// idle application costs no CPU. The doorbell is a socket pair whose other
// end only the daemon holds: neither side can make the other block through
// it. Memory is a memfd both processes map: the daemon
// copies from it into packets and from packets into it, once each way;
// the application never copies.
//
// A Client is safe for concurrent use; a QP is not (one goroutine posts
// and polls it, as with verbs), and neither is a Memory's bytes, which the
// application owns.
//
// If the daemon goes away, calls return ErrDaemonGone promptly, waits
// included: a goroutine reads the control socket and sees it close, and
// every queue pair reports EventDaemonGone. What happens to a queue
// pair's connection (connected, closed by the peer, failed, the peer
// silent past its retries or keepalive) comes as events through its
// completion queue (events.go); a wait for completions that can no
// longer come ends with the event's error.
package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/metaroce/metaroce/control/proto"
)

// DefaultSocket is where metaroced listens unless configured otherwise.
const DefaultSocket = "/run/metaroced/control.sock"

// Errors. A daemon's refusal is a *proto.Error wrapped in one of these
// where one fits (errors.Is works on both).
var (
	ErrDaemonGone  = errors.New("metaroce: daemon gone")
	ErrLimit       = errors.New("metaroce: session limit reached")
	ErrNotFound    = errors.New("metaroce: no such object")
	ErrBadRegion   = errors.New("metaroce: memory cannot be registered")
	ErrConnect     = errors.New("metaroce: connect failed")
	ErrBadState    = errors.New("metaroce: queue pair in the wrong state")
	ErrBadRequest  = errors.New("metaroce: bad request")
	ErrVersion     = errors.New("metaroce: daemon speaks another protocol version")
	ErrSQFull      = errors.New("metaroce: send queue full")
	ErrOutOfRange  = errors.New("metaroce: range outside the memory region")
	ErrDaemonError = errors.New("metaroce: daemon error")
	ErrBusy        = errors.New("metaroce: in use")
)

var codeErr = map[proto.Code]error{
	proto.CodeLimit: ErrLimit, proto.CodeNotFound: ErrNotFound, proto.CodeBadRegion: ErrBadRegion,
	proto.CodeConnect: ErrConnect, proto.CodeState: ErrBadState, proto.CodeBadRequest: ErrBadRequest,
	proto.CodeVersion: ErrVersion, proto.CodeBusy: ErrBusy,
}

// Client is one session with the daemon: a protection domain. Everything
// made through it is freed by the daemon when it closes (or the process
// dies).
type Client struct {
	c *proto.Conn

	mu   sync.Mutex // one request at a time
	seq  uint64
	resp chan reply

	gone     chan struct{}
	goneFlag atomic.Bool

	// Limits as the daemon announced them (0: none).
	MaxRegions     int
	MaxRegionBytes int64
	MaxQPs         int
	SessionID      uint64
	// MaxSGE is the most scatter-gather entries a work request may carry
	// (WR.SGL; 0: the daemon takes none).
	MaxSGE int
	// EngineCPUs are the CPUs the daemon pinned its engines to (empty:
	// not pinned, or a daemon that does not say); see AvoidEngineCPUs.
	EngineCPUs []int
}

type reply struct {
	msg   []byte
	files []*os.File
}

// Dial opens a session on the daemon's control socket at path
// (DefaultSocket if empty).
func Dial(path string) (*Client, error) {
	if path == "" {
		path = DefaultSocket
	}
	pc, err := proto.Dial(path)
	if err != nil {
		return nil, fmt.Errorf("metaroce: dial %s: %w", path, err)
	}
	c := &Client{c: pc, resp: make(chan reply, 1), gone: make(chan struct{})}
	go c.read()
	var r proto.Response
	if _, err := c.do(proto.Request{Header: proto.Header{Op: proto.OpHello}}, &r); err != nil {
		c.Close()
		return nil, err
	}
	c.MaxRegions, c.MaxRegionBytes, c.MaxQPs, c.SessionID = r.MaxRegions, r.MaxRegionBytes, r.MaxQPs, r.SessionID
	c.MaxSGE = min(r.MaxSGE, MaxSGE)
	c.EngineCPUs = r.EngineCPUs
	return c, nil
}

// read hands replies to do and notices the daemon's end.
func (c *Client) read() {
	defer func() {
		c.goneFlag.Store(true)
		close(c.gone)
	}()
	for {
		msg, files, err := c.c.Recv()
		if err != nil {
			if errors.Is(err, proto.ErrTruncated) {
				continue
			}
			return
		}
		m := append([]byte(nil), msg...)
		select {
		case c.resp <- reply{m, files}:
		default: // nobody asked: a stray message, dropped
			for _, f := range files {
				f.Close()
			}
		}
	}
}

// Close ends the session: the daemon frees its regions and queue pairs.
func (c *Client) Close() error { return c.c.Close() }

// Gone is closed when the daemon has gone away.
func (c *Client) Gone() <-chan struct{} { return c.gone }

// do sends req with fds and decodes the reply into resp, returning the
// descriptors that came with it.
func (c *Client) do(req proto.Request, resp *proto.Response, fds ...int) ([]*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goneFlag.Load() {
		return nil, ErrDaemonGone
	}
	c.seq++
	req.V, req.Seq = proto.Version, c.seq
	if err := c.c.Send(req, fds...); err != nil {
		if c.goneFlag.Load() {
			return nil, ErrDaemonGone
		}
		return nil, fmt.Errorf("metaroce: %s: %w", req.Op, err)
	}
	var r reply
	select {
	case r = <-c.resp:
	case <-c.gone:
		return nil, ErrDaemonGone
	}
	h, err := proto.Decode(r.msg, resp)
	if err != nil {
		closeAll(r.files)
		return nil, fmt.Errorf("metaroce: %s: bad reply: %w", req.Op, err)
	}
	if h.Seq != req.Seq {
		closeAll(r.files)
		return nil, fmt.Errorf("metaroce: %s: reply to request %d, want %d", req.Op, h.Seq, req.Seq)
	}
	if h.Code != proto.CodeOK {
		closeAll(r.files)
		pe := &proto.Error{Code: h.Code, Msg: h.Error}
		kind, ok := codeErr[h.Code]
		if !ok {
			kind = ErrDaemonError
		}
		oe := &opError{kind: kind, op: req.Op, pe: pe}
		if rj := resp.Rejection; rj != nil {
			return nil, &RejectedError{Reason: rj.Reason, AppReason: rj.AppReason, Private: rj.Private, err: oe}
		}
		return nil, oe
	}
	return r.files, nil
}

// opError is a request the daemon refused: errors.Is matches its kind
// (ErrConnect, ErrLimit, ...) and errors.As its *proto.Error, and it reads
// "metaroce: connect failed: connect: connection to ... failed", each part
// once (the kind already says what the code says).
type opError struct {
	kind error
	op   string
	pe   *proto.Error
}

func (e *opError) Error() string {
	if e.pe.Msg == "" {
		return e.kind.Error() + ": " + e.op
	}
	return e.kind.Error() + ": " + e.op + ": " + e.pe.Msg
}

func (e *opError) Unwrap() []error { return []error{e.kind, e.pe} }

// RejectedError is a connect the peer refused (rdma_cm's
// RDMA_CM_EVENT_REJECTED): errors.Is matches ErrConnect, and its fields
// say why. Reason is the REJECT's ("no_service": nothing listens there
// with that token, "limit", "application": the listening application
// refused); for "application", AppReason and Private are what it gave
// Reject.
type RejectedError struct {
	Reason    string
	AppReason uint16
	Private   []byte
	err       *opError
}

func (e *RejectedError) Error() string {
	if e.Reason == "application" {
		return fmt.Sprintf("%v (application reason %d)", e.err, e.AppReason)
	}
	return e.err.Error()
}

func (e *RejectedError) Unwrap() error { return e.err }

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// SessionInfo is what the session holds, as the daemon counts it.
type SessionInfo struct {
	Regions, QPs int
	Bytes        int64
}

// Session asks the daemon what this session holds.
func (c *Client) Session() (SessionInfo, error) {
	var r proto.Response
	_, err := c.do(proto.Request{Header: proto.Header{Op: proto.OpSession}}, &r)
	return SessionInfo{Regions: r.Regions, QPs: r.QPs, Bytes: r.Bytes}, err
}

// DaemonCounts are the daemon's totals over every live session.
type DaemonCounts struct {
	Sessions, Regions, QPs int
	Bytes                  int64
}

// Daemon asks for the daemon-wide totals (this session included).
func (c *Client) Daemon() (DaemonCounts, error) {
	var r proto.Response
	_, err := c.do(proto.Request{Header: proto.Header{Op: proto.OpSessions}}, &r)
	return DaemonCounts{Sessions: r.Sessions, Regions: r.Regions, QPs: r.QPs, Bytes: r.Bytes}, err
}

// goneCtx returns a context cancelled when ctx ends or the daemon goes.
func (c *Client) goneCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-c.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
