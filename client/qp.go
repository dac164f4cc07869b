package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
)

// QPOptions size a queue pair (zero: the daemon's defaults).
type QPOptions struct {
	SQSlots, CQSlots int // powers of two
	Engine           int // which of the daemon's engines (interface queues) serves it
	// Spin is how long WaitCQ polls, yielding the CPU between looks,
	// before it sleeps on the doorbell (0: SpinBeforeSleep; negative:
	// never sleep, perftest's polling mode).
	Spin time.Duration
	// CQ, if not nil, is the shared completion queue the queue pair
	// completes into (cq.go) instead of one of its own (CQSlots must
	// then be 0). The queue pair is placed on the CQ's engine; an
	// Engine naming another is refused.
	CQ *CQ
	// RNRRetryForever: a SEND the peer refuses because it has no receive
	// posted is retried for as long as the peer answers (backing off to
	// once a millisecond) instead of failing the connection with ErrRNR
	// after the daemon's RNR retry limit (about 0.1 s by default):
	// InfiniBand's rnr_retry 7. For receivers that may not drain for a
	// while (a rank computing). A peer that is gone still ends the
	// connection (ErrRetryExceeded). Connect, Accept and a listener's
	// ConnRequest.Accept onto this queue pair all honour it.
	RNRRetryForever bool
}

// QP is a queue pair: a send queue of work requests and a completion
// queue, both shared with the daemon's engine. Use it from one goroutine.
type QP struct {
	c          *Client
	Num        uint32     // the number a peer connects to
	Token      uint64     // what a peer's Connect must carry: ship it with Num (docs/api.md)
	Local      netip.Addr // the engine's address (what a peer connects to)
	MaxPayload int        // payload bytes per packet on this engine

	sq, cq *ring.Ring // cq nil on a shared CQ
	sqp    *ring.Producer
	cqc    *ring.Consumer
	shared *CQ            // the shared CQ it completes into, if any
	bell   *ring.Doorbell // our end: we ring the engine through it, and wait on it for completions
	spin   time.Duration
	gate   ring.YieldGate // whether WaitCQ yield-polls or sleeps at once

	// Events (events.go): completions PollEvent took from the ring ahead
	// of the application (cap: the CQ's slots), the event queue, the
	// first terminal event's error, the state events imply.
	stash     []Completion
	events    []Event
	terminal  error
	state     QPState
	goneNoted bool
}

// CreateQP makes a queue pair.
func (c *Client) CreateQP(o QPOptions) (*QP, error) {
	var r proto.Response
	req := proto.Request{Header: proto.Header{Op: proto.OpCreateQP}, SQSlots: o.SQSlots,
		CQSlots: o.CQSlots, Engine: o.Engine, Events: true, RNRRetryForever: o.RNRRetryForever}
	want := 3
	if o.CQ != nil {
		req.CQ, want = o.CQ.Num, 2
	}
	files, err := c.do(req, &r)
	if err != nil {
		return nil, err
	}
	defer closeAll(files)
	if len(files) != want {
		return nil, fmt.Errorf("%w: create_qp: %d descriptors, want %d", ErrDaemonError, len(files), want)
	}
	q := &QP{c: c, Num: r.QPN, Token: r.Token, MaxPayload: r.MaxPayload, spin: o.Spin, shared: o.CQ}
	if q.spin == 0 {
		q.spin = SpinBeforeSleep
	}
	q.Local, _ = netip.ParseAddr(r.Local)
	if err := q.attach(files); err != nil {
		q.release()
		return nil, err
	}
	return q, nil
}

// attach maps the rings and opens the doorbells, each on a duplicate of
// the passed descriptor (files are closed by the caller).
func (q *QP) attach(files []*os.File) error {
	dup := func(f *os.File) (int, error) { return unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0) }
	var err error
	fd, err := dup(files[0])
	if err != nil {
		return err
	}
	if q.sq, err = ring.Attach(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("metaroce: send queue: %w", err)
	}
	if q.shared != nil {
		// Completions go to the shared CQ: the descriptors are the send
		// queue and the doorbell the queue pair rings the engine with.
		if q.sq.SlotSize() < proto.WRSize {
			return fmt.Errorf("%w: send queue slots of %d bytes", ErrDaemonError, q.sq.SlotSize())
		}
		if fd, err = dup(files[1]); err != nil {
			return err
		}
		if q.bell, err = ring.OpenDoorbell(fd); err != nil {
			unix.Close(fd)
			return fmt.Errorf("metaroce: doorbell: %w", err)
		}
		q.sq.CloseFD()
		q.sqp = q.sq.Producer()
		q.events = make([]Event, 0, maxEvents)
		return nil
	}
	if fd, err = dup(files[1]); err != nil {
		return err
	}
	if q.cq, err = ring.Attach(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("metaroce: completion queue: %w", err)
	}
	if q.sq.SlotSize() < proto.WRSize || q.cq.SlotSize() < proto.CQESize {
		return fmt.Errorf("%w: ring slots %d/%d bytes", ErrDaemonError, q.sq.SlotSize(), q.cq.SlotSize())
	}
	if fd, err = dup(files[2]); err != nil {
		return err
	}
	if q.bell, err = ring.OpenDoorbell(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("metaroce: doorbell: %w", err)
	}
	// The mappings hold the rings; their memfds would only hold a
	// descriptor each, of a process that may have thousands of queue
	// pairs (its doorbell end is the one it keeps).
	q.sq.CloseFD()
	q.cq.CloseFD()
	q.sqp, q.cqc = q.sq.Producer(), q.cq.Consumer()
	q.stash, q.events = make([]Completion, 0, q.cq.Slots()), make([]Event, 0, maxEvents)
	return nil
}

func (q *QP) release() {
	for _, r := range []*ring.Ring{q.sq, q.cq} {
		if r != nil {
			r.Close()
		}
	}
	if q.bell != nil {
		q.bell.Close()
	}
}

// Connect connects the queue pair to queue pair (or listener) remote on
// peer, presenting its token (the peer's QP.Token or Listener.Token,
// shipped out of band; 0 for a public listener), waiting until the
// connection is up, ctx ends, or the transport gives up. A wrong token
// fails like a number nothing listens on: a *RejectedError with Reason
// "no_service".
func (q *QP) Connect(ctx context.Context, peer netip.Addr, remote uint32, token uint64) error {
	_, err := q.ConnectWith(ctx, peer, remote, ConnectOptions{Token: token})
	return err
}

// ConnectOptions are what a connect carries to the listening application.
type ConnectOptions struct {
	Token   uint64 // the remote's token
	Private []byte // at most MaxPrivate bytes, shown to the listener's application
}

// MaxPrivate bounds connection private data (docs/spec.md §7.1).
const MaxPrivate = proto.MaxPrivate

// ConnectWith is Connect with private data; it returns the private data
// of the peer's ACCEPT. A refusal is a *RejectedError (errors.As), with
// the listening application's reason and private data if it rejected.
func (q *QP) ConnectWith(ctx context.Context, peer netip.Addr, remote uint32, o ConnectOptions) ([]byte, error) {
	if len(o.Private) > MaxPrivate {
		return nil, fmt.Errorf("%w: %d bytes of private data, at most %d", ErrBadRequest, len(o.Private), MaxPrivate)
	}
	req := proto.Request{Header: proto.Header{Op: proto.OpConnect}, QPN: q.Num, Peer: peer.String(), RemoteQPN: remote,
		Token: o.Token, Private: o.Private}
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(1, int(time.Until(d)/time.Millisecond))
	}
	var r proto.Response
	q.state = QPConnecting
	_, err := q.c.do(req, &r)
	if err != nil {
		return nil, err
	}
	q.state = QPConnected
	return r.Private, nil
}

// StartConnect starts connecting the queue pair as ConnectWith does and
// returns as soon as the daemon has sent the CONNECT (connect's nowait),
// without waiting for the peer: the outcome is the queue pair's next
// event (PollEvent, WaitEvent; on a shared CQ, its entry there):
// EventConnected, or EventFailed (a refusal: Status ErrRejected) or
// EventRetryExceeded (no answer within timeout) as ConnectWith's failure.
// The daemon keeps sending CONNECT for timeout (0: the transport's one
// attempt of about half a second), so a listener whose application
// accepts later, even after calling StartConnect itself (two peers each
// connecting to the other's listener first), is reached. An error means
// nothing was started, and no event follows. The ACCEPT's private data is
// not reported; a rejection's reason and data come only from ConnectWith.
func (q *QP) StartConnect(peer netip.Addr, remote uint32, o ConnectOptions, timeout time.Duration) error {
	if len(o.Private) > MaxPrivate {
		return fmt.Errorf("%w: %d bytes of private data, at most %d", ErrBadRequest, len(o.Private), MaxPrivate)
	}
	req := proto.Request{Header: proto.Header{Op: proto.OpConnect}, QPN: q.Num, Peer: peer.String(), RemoteQPN: remote,
		Token: o.Token, Private: o.Private, NoWait: true}
	if timeout > 0 {
		req.TimeoutMS = max(1, int(timeout/time.Millisecond))
	}
	var r proto.Response
	was := q.state
	q.state = QPConnecting
	if _, err := q.c.do(req, &r); err != nil {
		q.state = was
		return err
	}
	return nil
}

// Accept waits until a remote queue pair connects to this one, and
// returns its address.
func (q *QP) Accept(ctx context.Context) (netip.Addr, error) {
	for {
		req := proto.Request{Header: proto.Header{Op: proto.OpAccept}, QPN: q.Num, TimeoutMS: 1000}
		if d, ok := ctx.Deadline(); ok {
			req.TimeoutMS = max(1, min(1000, int(time.Until(d)/time.Millisecond)))
		}
		var r proto.Response
		_, err := q.c.do(req, &r)
		if err == nil {
			a, perr := netip.ParseAddr(r.Peer)
			if perr != nil {
				return netip.Addr{}, fmt.Errorf("%w: accept: peer %q", ErrDaemonError, r.Peer)
			}
			q.state = QPConnected
			return a, nil
		}
		// The daemon answers a wait that timed out with connect_failed;
		// a context that has not ended asks again (short waits keep the
		// session's request loop responsive).
		if !errors.Is(err, ErrConnect) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return netip.Addr{}, ctx.Err()
			}
			return netip.Addr{}, err
		}
	}
}

// yield lets another thread run (sched_yield); it returns at once when
// nothing else is runnable. (runtime.Gosched on every look measured
// twice the round trip: the goroutine goes round the global run queue.
// WaitCQ calls it every 32 looks, so the application's other goroutines
// still run.)
func yield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// Destroy closes the queue pair's connection and frees it in the daemon.
func (q *QP) Destroy() error {
	var r proto.Response
	_, err := q.c.do(proto.Request{Header: proto.Header{Op: proto.OpDestroyQP}, QPN: q.Num}, &r)
	q.release()
	return err
}

// WR is one work request for Post. For WRITE, READ and SEND, the local
// bytes are [LocalOff, LocalOff+Length) of Local; for WRITE and READ the
// remote ones start at RemoteAddr under RemoteKey.
type WR struct {
	Op         Op
	WRID       uint64
	Stream     uint16
	Local      *MR
	LocalOff   int
	Length     int
	RemoteAddr uint64
	RemoteKey  uint32
	Imm        uint32
	// Unsignaled: no completion when it succeeds (verbs without
	// IBV_SEND_SIGNALED, libfabric without FI_COMPLETION); a failure
	// completes as always. Ignored for a RECV, which always completes.
	// Completions come in order per stream, so a signaled request's
	// completion tells that the unsignaled ones before it on its stream
	// are done.
	Unsignaled bool
	// Inline is the data of a WRITE or SEND (with or without
	// immediate) carried in the work request itself, up to MaxInline
	// bytes (IBV_SEND_INLINE, fi_inject): copied at Post, so the caller
	// may reuse it at once; Local, LocalOff and Length are then unused.
	Inline []byte
	// SGL, if not empty, is the local side as a scatter-gather list of
	// up to MaxSGE entries (ibv_sge, fi_writev/fi_sendv/fi_readv): a
	// WRITE's or SEND's bytes are gathered from the entries in order, a
	// READ's scattered into them (with local write on each region).
	// Local, LocalOff and Length are then unused. Not on a RECV. It
	// takes two send queue slots (docs/api.md).
	SGL []SGE
}

// SGE is one scatter-gather entry: Length bytes at Off in MR.
type SGE struct {
	MR     *MR
	Off    int
	Length int
}

// MaxSGE is the most entries a work request's SGL may have (the daemon
// may allow fewer: Client.MaxSGE).
const MaxSGE = proto.MaxSGE

// ErrSGL: a scatter-gather list longer than the daemon allows, on a
// RECV, or with inline data.
var ErrSGL = errors.New("metaroce: scatter-gather list: 1..Client.MaxSGE entries, not on RECV, not with inline data")

// MaxInline is the most data a work request carries inline.
const MaxInline = proto.MaxInline

// ErrInline: inline data longer than MaxInline, or on a READ or RECV.
var ErrInline = errors.New("metaroce: inline data: at most MaxInline bytes, on WRITE or SEND")

// Op is a work request's operation.
type Op uint8

const (
	OpWrite    = Op(proto.WRWrite)
	OpWriteImm = Op(proto.WRWriteImm)
	OpRead     = Op(proto.WRRead)
	OpSend     = Op(proto.WRSend)
	OpSendImm  = Op(proto.WRSendImm)
	OpRecv     = Op(proto.WRRecv)
)

// Post puts work requests on the send queue and wakes the engine if it
// sleeps. It posts as many as fit and returns how many; ErrSQFull if none
// did. Every request posted completes once (PollCQ).
func (q *QP) Post(wrs ...WR) (int, error) {
	if q.c.goneFlag.Load() {
		return 0, ErrDaemonGone
	}
	slots := uint32(0) // a request with an SGL takes two
	for i := range wrs {
		slots++
		if len(wrs[i].SGL) > 0 {
			slots++
		}
	}
	first, got, err := q.sqp.Reserve(slots)
	if err != nil {
		return 0, err
	}
	n, used := 0, uint32(0)
	for ; n < len(wrs); n++ {
		w := &wrs[n]
		k := uint32(1)
		if len(w.SGL) > 0 {
			k = 2
		}
		if used+k > got {
			break
		}
		if err = q.put(w, first+used); err != nil {
			break
		}
		used += k
	}
	q.sqp.Commit(used) // Commit(0) gives an unused reservation back
	if used > 0 {
		if _, nerr := q.sqp.Notify(q.bell); nerr != nil && err == nil {
			err = nerr
		}
	}
	if err != nil {
		return n, err
	}
	if n == 0 && len(wrs) > 0 {
		return 0, ErrSQFull
	}
	return n, nil
}

// put writes w into the reserved slot i (and its continuation, i+1, for
// an SGL).
func (q *QP) put(w *WR, i uint32) error {
	var flags uint8
	if w.Unsignaled {
		flags = proto.WRUnsignaled
	}
	switch {
	case len(w.SGL) > 0:
		if len(w.SGL) > q.c.MaxSGE || w.Op == OpRecv || w.Inline != nil {
			return ErrSGL
		}
		pw := proto.WR{Op: proto.WROp(w.Op), Flags: flags | proto.WRSGL, Stream: w.Stream, WRID: w.WRID,
			RKey: w.RemoteKey, RAddr: w.RemoteAddr, Imm: w.Imm, NSGE: uint8(len(w.SGL))}
		total := uint64(0)
		for j, e := range w.SGL {
			if e.MR == nil {
				return fmt.Errorf("%w: scatter-gather entry %d without a region", ErrOutOfRange, j)
			}
			a, err := e.MR.addr(e.Off, e.Length)
			if err != nil {
				return err
			}
			pw.SGL[j] = proto.SGE{Addr: a, Length: uint32(e.Length), LKey: e.MR.Key}
			total += uint64(e.Length)
		}
		if total > 0xffffffff {
			return fmt.Errorf("%w: scatter-gather list of %d bytes", ErrOutOfRange, total)
		}
		pw.Length = uint32(total)
		pw.PutSGL(q.sqp.Slot(i + 1))
		pw.Put(q.sqp.Slot(i))
	case w.Inline != nil:
		if len(w.Inline) > MaxInline || w.Op == OpRead || w.Op == OpRecv {
			return ErrInline
		}
		pw := proto.WR{Op: proto.WROp(w.Op), Flags: flags | proto.WRInline, Stream: w.Stream, WRID: w.WRID,
			Length: uint32(len(w.Inline)), RKey: w.RemoteKey, RAddr: w.RemoteAddr, Imm: w.Imm}
		copy(pw.Inline[:], w.Inline)
		pw.Put(q.sqp.Slot(i))
	default:
		if w.Local == nil {
			return fmt.Errorf("%w: work request without a local region", ErrOutOfRange)
		}
		la, err := w.Local.addr(w.LocalOff, w.Length)
		if err != nil {
			return err
		}
		pw := proto.WR{Op: proto.WROp(w.Op), Flags: flags, Stream: w.Stream, LKey: w.Local.Key, WRID: w.WRID, LAddr: la,
			Length: uint32(w.Length), RKey: w.RemoteKey, RAddr: w.RemoteAddr, Imm: w.Imm}
		pw.Put(q.sqp.Slot(i))
	}
	return nil
}

// PostWrite posts an RDMA WRITE of local[off:off+n] to raddr under rkey.
func (q *QP) PostWrite(wrid uint64, local *MR, off, n int, raddr uint64, rkey uint32) error {
	return q.post1(WR{Op: OpWrite, WRID: wrid, Local: local, LocalOff: off, Length: n, RemoteAddr: raddr, RemoteKey: rkey})
}

// PostWriteImm is PostWrite with immediate data, which completes at the
// peer as a RecvWriteImm completion.
func (q *QP) PostWriteImm(wrid uint64, local *MR, off, n int, raddr uint64, rkey uint32, imm uint32) error {
	return q.post1(WR{Op: OpWriteImm, WRID: wrid, Local: local, LocalOff: off, Length: n, RemoteAddr: raddr, RemoteKey: rkey, Imm: imm})
}

// PostRead posts an RDMA READ of n bytes at raddr (rkey) into local[off:].
func (q *QP) PostRead(wrid uint64, local *MR, off, n int, raddr uint64, rkey uint32) error {
	return q.post1(WR{Op: OpRead, WRID: wrid, Local: local, LocalOff: off, Length: n, RemoteAddr: raddr, RemoteKey: rkey})
}

// PostSend posts a SEND of local[off:off+n], consumed by the peer's next
// posted receive.
func (q *QP) PostSend(wrid uint64, local *MR, off, n int) error {
	return q.post1(WR{Op: OpSend, WRID: wrid, Local: local, LocalOff: off, Length: n})
}

// PostRecv posts a receive buffer local[off:off+n] for the peer's SENDs.
func (q *QP) PostRecv(wrid uint64, local *MR, off, n int) error {
	return q.post1(WR{Op: OpRecv, WRID: wrid, Local: local, LocalOff: off, Length: n})
}

func (q *QP) post1(w WR) error {
	_, err := q.Post(w)
	return err
}

// PollCQ takes up to len(dst) completions without blocking. Connection
// events in the completion queue go to the event queue (PollEvent), not
// to dst.
func (q *QP) PollCQ(dst []Completion) (int, error) {
	if q.shared != nil {
		return 0, ErrSharedCQ
	}
	n := 0
	if len(q.stash) > 0 {
		n = copy(dst, q.stash)
		q.stash = q.stash[:copy(q.stash, q.stash[n:])]
	}
	if n < len(dst) {
		got, err := q.pollRing(dst[n:])
		n += got
		if err != nil {
			return n, err
		}
	}
	if n == 0 && q.c.goneFlag.Load() {
		q.noteGone()
		return 0, ErrDaemonGone
	}
	return n, nil
}

// pollRing takes completions from the ring into dst, and events into the
// event queue.
func (q *QP) pollRing(dst []Completion) (int, error) {
	if q.cqc == nil {
		return 0, ErrSharedCQ
	}
	first, got, err := q.cqc.Peek(uint32(len(dst)))
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range got {
		c, ok := proto.ParseCQE(q.cqc.Slot(first + i))
		if !ok {
			q.cqc.Release(i)
			return n, fmt.Errorf("%w: malformed completion", ErrDaemonError)
		}
		if c.Op == proto.CQEvent {
			q.pushEvent(Event{Type: EventType(c.Event), Status: Status(c.Status)})
			continue
		}
		dst[n] = Completion{WRID: c.WRID, Op: CompletionOp(c.Op), Status: Status(c.Status), Bytes: int(c.Bytes),
			Imm: c.Imm, HasImm: c.HasImm, Stream: c.Stream, QPN: c.QPN}
		n++
	}
	q.cqc.Release(got)
	return n, nil
}

// SpinBeforeSleep is how long WaitCQ polls before it sleeps on the
// doorbell. It polls yielding the CPU (sched_yield) between looks, so the
// daemon's engine, or anything else runnable, takes the core at once when
// it needs it and the spin only uses time nobody else wants. A completion
// due within that time is then picked up within about a microsecond of
// its arrival, where a sleeper is woken tens of microseconds later (a
// wake-up on a VM whose idle vCPU halts costs ~36 us) and the engine pays
// a syscall to wake it. Beyond it the wait sleeps, so an idle
// application costs no CPU.
var SpinBeforeSleep = 500 * time.Microsecond

// hotPolls is how many looks WaitCQ takes before it starts yielding: a
// completion already on its way costs no syscall.
const hotPolls = 8

// WaitCQ blocks until at least one completion is there, ctx ends, or the
// daemon goes, then takes up to len(dst). It polls for the queue pair's
// Spin first (QPOptions), yielding the CPU between looks, then sleeps on
// the doorbell. It sleeps at once instead when its yields have been losing
// the CPU for long (a thread that does not yield shares it: see
// ring.YieldGate), and stops yielding as soon as one does.
func (q *QP) WaitCQ(ctx context.Context, dst []Completion) (int, error) {
	if q.shared != nil {
		return 0, ErrSharedCQ
	}
	var start, last time.Time
	for i := 0; ; i++ {
		if n, err := q.PollCQ(dst); n > 0 || err != nil {
			if i > hotPolls {
				q.gate.Done()
			}
			return n, err
		}
		if q.terminal != nil {
			q.gate.Done()
			return 0, q.terminal
		}
		if i < hotPolls {
			continue
		}
		// Yielding: one clock read per look, against a yield's ~300 ns.
		t := time.Now()
		if i == hotPolls {
			start = t
			if !q.gate.Start() && q.spin >= 0 {
				break // yields have been stalling: sleep (see ring.YieldGate)
			}
		} else if q.spin >= 0 && t.Sub(last) > ring.YieldStall {
			// That yield lost the CPU for long: a thread that does not
			// yield back holds it, and a yielder gets it back only when
			// that one's time slice ends, where a sleeper is woken ahead
			// of it. Sleep now. (A negative Spin never sleeps.)
			q.gate.Stalled()
			break
		}
		if q.spin >= 0 && t.Sub(start) >= q.spin {
			q.gate.Done()
			break
		}
		if i%32 == 0 {
			if err := ctx.Err(); err != nil {
				q.gate.Done()
				return 0, err
			}
			runtime.Gosched()
			t = time.Now() // a stall is the yield's alone, not other goroutines' turn
		}
		last = t
		yield()
	}
	for {
		if n, err := q.PollCQ(dst); n > 0 || err != nil {
			return n, err
		}
		if q.terminal != nil {
			return 0, q.terminal // the connection is over: nothing more will complete
		}
		if err := q.waitRing(ctx); err != nil {
			if n, _ := q.PollCQ(dst); n > 0 {
				return n, nil
			}
			return 0, err
		}
	}
}

// waitRing sleeps on the doorbell until the completion queue has an
// entry, ctx ends or the daemon goes (ErrDaemonGone).
func (q *QP) waitRing(ctx context.Context) error {
	wctx, cancel := q.c.goneCtx(ctx)
	defer cancel()
	if err := q.cqc.WaitContext(wctx, q.bell); err != nil {
		if q.c.goneFlag.Load() {
			return ErrDaemonGone
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}
