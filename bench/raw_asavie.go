package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asavie/xdp"
	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/internal/testnet"
	"golang.org/x/sys/unix"
)

// asavieBindTimeout bounds the retries of a bind that fails with EBUSY,
// which the kernel answers for 5 to 130 ms after the queue's previous socket
// closed (our xsk.Open retries the same way; asavie's NewSocket does not).
const asavieBindTimeout = 500 * time.Millisecond

// asavieHost is one host of an asavie run: our steering program on its port
// (bpf_link) and an asavie socket on queue 0, registered in our XSKMAP.
// Nothing of asavie's program side (NewProgram, Attach, Detach, Register)
// is used: see the package documentation.
type asavieHost struct {
	host *testnet.Host
	prog *bpf.Program
	att  bpf.Attachment
	sock *xdp.Socket
	ino  uint64 // the socket's inode: how its ring mappings are found
	zc   bool   // bound in zero-copy mode
	// budget is the XDP_MAX_TX_SKB_BUDGET set on its fd, 0 if refused
	// (budgetErr).
	budget    uint32
	budgetErr error
}

func openAsavieHost(h *testnet.Host, opts RawOptions) (*asavieHost, error) {
	if l := layoutFor(opts); l.sg || l.chunk != umemChunk {
		return nil, fmt.Errorf("asavie/xdp runs single-buffer frames in %d-byte chunks: a %d-byte frame at MTU %d does not fit (it has no XDP_USE_SG)",
			umemChunk, opts.FrameSize, opts.MTU)
	}
	prog, att, ifindex, err := attachProgram(h, opts.Port, false)
	if err != nil {
		return nil, err
	}
	e := &asavieHost{host: h, prog: prog, att: att}
	so := xdp.SocketOptions{
		NumFrames: umemFrames, FrameSize: umemChunk,
		FillRingNumDescs: ringSize, CompletionRingNumDescs: ringSize,
		RxRingNumDescs: ringSize, TxRingNumDescs: ringSize,
	}
	if err := h.Do(func() error {
		var err error
		e.sock, e.ino, err = newAsavieSocket(ifindex, &so)
		return err
	}); err != nil {
		prog.Close()
		return nil, fmt.Errorf("open asavie socket on %s: %w", h.Port, err)
	}
	fd := e.sock.FD()
	// The same TX budget as our layer sets, for a like-for-like comparison;
	// asavie has no option for it, so it is set on its fd directly.
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, int(opts.TxSkbBudget)); err != nil {
		e.budgetErr = err
	} else {
		e.budget = opts.TxSkbBudget
	}
	if flags, err := unix.GetsockoptInt(fd, unix.SOL_XDP, unix.XDP_OPTIONS); err == nil {
		e.zc = flags&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	if err := prog.SetSocket(0, fd); err != nil {
		return nil, errors.Join(fmt.Errorf("register asavie socket of %s: %w", h.Port, err), e.close())
	}
	return e, nil
}

// newAsavieSocket calls xdp.NewSocket, retrying while the bind fails with
// EBUSY, and returns the socket with its inode. A failed NewSocket closes
// its fd and unmaps its UMEM but not its rings; those mappings hold the
// socket (and its registered UMEM) alive, so they are unmapped here.
func newAsavieSocket(ifindex int, so *xdp.SocketOptions) (*xdp.Socket, uint64, error) {
	deadline := time.Now().Add(asavieBindTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		before, err := socketMappings()
		if err != nil {
			return nil, 0, err
		}
		var s *xdp.Socket
		err = protect(func() (err error) {
			s, err = xdp.NewSocket(ifindex, 0, so)
			return err
		})
		if err == nil {
			var st unix.Stat_t
			if err := unix.Fstat(s.FD(), &st); err != nil {
				return nil, 0, errors.Join(fmt.Errorf("fstat asavie socket: %w", err), closeAsavie(s, 0))
			}
			return s, st.Ino, nil
		}
		after, merr := socketMappings()
		if merr == nil {
			merr = unmapOrphans(before, after)
		}
		if merr != nil {
			return nil, 0, errors.Join(err, merr)
		}
		// asavie formats the errno with %v: match its text.
		if !strings.Contains(err.Error(), unix.EBUSY.Error()) || time.Now().After(deadline) {
			return nil, 0, err
		}
		time.Sleep(delay)
	}
}

// closeAsavie closes s and unmaps the ring mappings its Close leaves behind
// (asavie's Close unmaps the UMEM only). Until they go, the kernel keeps the
// socket bound to its queue, so the next bind there would fail with EBUSY,
// and keeps its UMEM pinned.
func closeAsavie(s *xdp.Socket, ino uint64) error {
	err := s.Close()
	if ino == 0 {
		return err
	}
	m, merr := socketMappings()
	if merr == nil {
		merr = unmapSocket(m, ino)
	}
	return errors.Join(err, merr)
}

func (e *asavieHost) close() error {
	var err error
	if e.sock != nil {
		err = closeAsavie(e.sock, e.ino)
	}
	return errors.Join(err, e.prog.Close())
}

// asavieRaw is the rawBackend on asavie/xdp.
type asavieRaw struct {
	a, b *asavieHost
	is6  bool
}

func openAsavie(s rawSetup) (rawBackend, error) {
	a, err := openAsavieHost(s.a, s.opts)
	if err != nil {
		return nil, err
	}
	b, err := openAsavieHost(s.b, s.opts)
	if err != nil {
		return nil, errors.Join(err, a.close())
	}
	return &asavieRaw{a: a, b: b, is6: s.opts.IPv6}, nil
}

func (x *asavieRaw) close() error { return errors.Join(x.a.close(), x.b.close()) }

func (x *asavieRaw) describe(res *RawResult) {
	res.XDPMode = x.a.att.Mode.String()
	if x.b.att.Mode != x.a.att.Mode {
		res.XDPMode += "/" + x.b.att.Mode.String()
	}
	res.Bind = "copy"
	if x.a.zc && x.b.zc {
		res.Bind = "zerocopy"
	}
	res.TxSkbBudget = min(x.a.budget, x.b.budget)
	if x.a.budgetErr != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("TX budget refused: %v", x.a.budgetErr))
	}
	res.Notes = append(res.Notes, "asavie/xdp v0.3.3: our XDP program via bpf_link, its socket and rings only; "+
		"no need_wakeup (a sendto per TX batch, as veth needs anyway); plain loads and stores on the ring indices")
}

// transmit calls s.Transmit, turning its panic (on any sendto errno but
// EINTR, EAGAIN and EBUSY) into an error. The panic comes after the
// descriptors were published, so n is how many the ring took either way.
func transmit(s *xdp.Socket, descs []xdp.Desc) (n int, err error) {
	n = min(len(descs), s.NumFreeTxSlots())
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("asavie/xdp Transmit panicked: %v", r)
		}
	}()
	return s.Transmit(descs), nil
}

func (x *asavieRaw) prepareRate(r *rateRun) error {
	a, b := x.a.sock, x.b.sock
	for i := uint64(0); i < umemFrames; i++ {
		buf := a.GetFrame(xdp.Desc{Addr: i * umemChunk, Len: umemChunk})
		if _, err := r.tmpl.build(buf, kindBlast, 0); err != nil {
			return err
		}
	}
	b.Fill(b.GetDescs(b.NumFreeFillSlots()))
	return nil
}

func (x *asavieRaw) blast(r *rateRun) error {
	s := x.a.sock
	t := &r.tmpl
	var seq uint64
	for !r.stopTX.Load() {
		if c := s.NumCompleted(); c > 0 {
			s.Complete(c)
		}
		descs := s.GetDescs(min(rawBatch, s.NumFreeTxSlots()))
		if len(descs) == 0 {
			// No free frame or no TX slot: kick the kernel (asavie's
			// Transmit always makes a sendto).
			if _, err := transmit(s, nil); err != nil {
				return err
			}
			continue
		}
		for i := range descs {
			stamp(s.GetFrame(descs[i])[t.hdrLen:], seq+uint64(i))
			descs[i].Len = uint32(t.frameLen)
		}
		q, err := transmit(s, descs)
		seq += uint64(q)
		r.sent.Store(seq)
		if err != nil {
			return err
		}
	}
	for end := time.Now().Add(drainTimeout); ; {
		if c := s.NumCompleted(); c > 0 {
			s.Complete(c)
		}
		if s.NumTransmitted() == 0 || time.Now().After(end) {
			return nil
		}
		if _, err := transmit(s, nil); err != nil {
			return err
		}
	}
}

func (x *asavieRaw) sink(r *rateRun) error {
	s := x.b.sock
	t := &r.tmpl
	for !r.stopRX.Load() {
		n := s.NumReceived()
		if n == 0 {
			continue
		}
		descs := s.Receive(min(n, rawBatch))
		for _, d := range descs {
			r.chk.observe(t.check(s.GetFrame(d), kindBlast, t.frameLen))
		}
		s.Fill(descs)
		r.received.Store(r.chk.received)
	}
	return nil
}

func (x *asavieRaw) sinkCounters() (uint64, sockDrops, error) {
	c, err := x.b.prog.Counters()
	if err != nil {
		return 0, sockDrops{}, fmt.Errorf("xdp counters of %s: %w", x.b.host.Port, err)
	}
	st, err := x.b.sock.Stats()
	if err != nil {
		return 0, sockDrops{}, fmt.Errorf("socket stats of %s: %w", x.b.host.Port, err)
	}
	k := st.KernelStats
	return c.Redirected, newSockDrops(k.Rx_fill_ring_empty_descs, k.Rx_ring_full, k.Rx_dropped, k.Rx_invalid_descs), nil
}

func (x *asavieRaw) prepareLatency(l *latRun) error {
	s := x.a.sock
	s.Fill(s.GetDescs(min(s.NumFreeFillSlots(), umemFrames/2)))
	return nil
}

func (x *asavieRaw) ping(l *latRun) error {
	s := x.a.sock
	t := &l.tmpl
	for i := 0; i < l.n && !l.stop.Load(); i++ {
		if c := s.NumCompleted(); c > 0 {
			s.Complete(c)
		}
		tx := s.GetDescs(1)
		if len(tx) == 0 {
			return errors.New("pinger has no free frame")
		}
		buf := s.GetFrame(tx[0])
		copy(buf, l.probe)
		stamp(buf[t.hdrLen:], uint64(i))
		tx[0].Len = uint32(len(l.probe))
		t0 := time.Now()
		q, err := transmit(s, tx[:1])
		if err != nil {
			return err
		}
		if q == 0 {
			l.lost++
			continue
		}
		for got := false; !got; {
			if k := s.NumReceived(); k > 0 {
				rx := s.Receive(k)
				for _, d := range rx {
					seq, ok := t.check(s.GetFrame(d), kindProbe, t.frameLen)
					if ok && seq == uint64(i) {
						l.samples = append(l.samples, time.Since(t0))
						got = true
					}
				}
				s.Fill(rx)
			}
			if !got && (time.Since(t0) > probeTimeout || l.stop.Load()) {
				l.lost++
				break
			}
		}
	}
	return nil
}

func (x *asavieRaw) reflect(l *latRun) error {
	s := x.b.sock
	t := &l.tmpl
	var txb, backb [rawBatch]xdp.Desc
	for !l.stop.Load() {
		if c := s.NumCompleted(); c > 0 {
			s.Complete(c)
		}
		if k := s.NumReceived(); k > 0 {
			tx, back := txb[:0], backb[:0]
			for _, d := range s.Receive(min(k, rawBatch)) {
				f := s.GetFrame(d)
				if _, ok := t.check(f, kindProbe, t.frameLen); ok {
					turnAround(f, x.is6)
					tx = append(tx, d)
				} else {
					back = append(back, d)
				}
			}
			if len(tx) > 0 {
				q, err := transmit(s, tx)
				if err != nil {
					return err
				}
				back = append(back, tx[q:]...)
			}
			if len(back) > 0 {
				s.Fill(back)
			}
		}
		// Frames that were sent back return free through Complete: top the
		// fill ring up with them.
		if free := s.NumFreeFillSlots(); free >= rawBatch {
			s.Fill(s.GetDescs(rawBatch))
		}
	}
	return nil
}
