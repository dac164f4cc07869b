package bench

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane/afxdp"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/internal/testnet"
)

// rawLayout is how the xsk backend lays frames out for the options' MTU
// and frame size: the same rule as the AF_XDP link's (afxdp.plan), so the
// baseline and MetaRoCE run the same frames.
type rawLayout struct {
	chunk      uint32 // UMEM chunk size
	sg         bool   // XDP_USE_SG and the frags program
	spanFrames uint32 // chunks per TX span when a frame does not fit one; 0: none
}

// maxChunkFrame is the longest frame one 4096-byte chunk receives in copy
// mode (after the kernel's 256-byte headroom).
const maxChunkFrame = 4096 - 256

func layoutFor(o RawOptions) rawLayout {
	l := rawLayout{chunk: umemChunk}
	if o.FrameSize > umemChunk-256 || o.MTU > afxdp.SingleBufferMTU {
		l.chunk = 4096
	}
	l.sg = o.MTU > afxdp.SingleBufferMTU || o.FrameSize > maxChunkFrame
	if o.FrameSize > int(l.chunk) {
		l.spanFrames = uint32((o.FrameSize + int(l.chunk) - 1) / int(l.chunk))
	}
	return l
}

// xskHost is one host of an xsk run: the steering program on its port and
// one socket on queue 0 of it.
type xskHost struct {
	host *testnet.Host
	prog *bpf.Program
	att  bpf.Attachment
	sock *xsk.Socket
	lay  rawLayout
}

// attachProgram loads the production steering program for port and
// attaches it to h's port through a bpf_link, on a thread inside h's
// namespace. It returns the interface index there. The caller closes prog.
func attachProgram(h *testnet.Host, port uint16, frags bool) (prog *bpf.Program, att bpf.Attachment, ifindex int, err error) {
	prog, err = bpf.Load(bpf.Options{Port: port, Queues: 1, Frags: frags})
	if err != nil {
		return nil, att, 0, fmt.Errorf("load xdp program: %w", err)
	}
	err = h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Port.Name)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		att, err = prog.Attach(ifindex, bpf.ModeAuto)
		return err
	})
	if err != nil {
		prog.Close()
		return nil, att, 0, fmt.Errorf("attach xdp program to %s: %w", h.Port, err)
	}
	return prog, att, ifindex, nil
}

func openXSKHost(h *testnet.Host, opts RawOptions) (*xskHost, error) {
	lay := layoutFor(opts)
	prog, att, ifindex, err := attachProgram(h, opts.Port, lay.sg)
	if err != nil {
		return nil, err
	}
	e := &xskHost{host: h, prog: prog, att: att, lay: lay}
	cfg := xsk.Config{
		FrameSize: lay.chunk, NumFrames: umemFrames,
		FillSize: ringSize, CompletionSize: ringSize, RxSize: ringSize, TxSize: ringSize,
		TxSkbBudget: opts.TxSkbBudget, SG: lay.sg,
	}
	if lay.spanFrames > 0 {
		// As many spans as the TX ring holds chains of; the pool's frames
		// then only receive (and carry probes).
		cfg.TxSpans, cfg.SpanFrames = ringSize/lay.spanFrames, lay.spanFrames
	}
	if err := h.Do(func() error {
		e.sock, err = xsk.Open(ifindex, 0, cfg)
		return err
	}); err != nil {
		prog.Close()
		return nil, fmt.Errorf("open AF_XDP socket on %s: %w", h.Port, err)
	}
	if err := prog.SetSocket(0, e.sock.FD()); err != nil {
		return nil, errors.Join(fmt.Errorf("register socket of %s: %w", h.Port, err), e.close())
	}
	return e, nil
}

func (e *xskHost) close() error {
	var err error
	if e.sock != nil {
		err = e.sock.Close()
	}
	return errors.Join(err, e.prog.Close())
}

// xskRaw is the rawBackend on dataplane/xsk: a sends, b sinks and reflects.
type xskRaw struct {
	a, b *xskHost
	is6  bool
}

func openXSK(s rawSetup) (rawBackend, error) {
	a, err := openXSKHost(s.a, s.opts)
	if err != nil {
		return nil, err
	}
	b, err := openXSKHost(s.b, s.opts)
	if err != nil {
		return nil, errors.Join(err, a.close())
	}
	return &xskRaw{a: a, b: b, is6: s.opts.IPv6}, nil
}

func (x *xskRaw) close() error { return errors.Join(x.a.close(), x.b.close()) }

func (x *xskRaw) describe(res *RawResult) {
	ia, ib := x.a.sock.Info(), x.b.sock.Info()
	res.XDPMode = x.a.att.Mode.String()
	if x.b.att.Mode != x.a.att.Mode {
		res.XDPMode += "/" + x.b.att.Mode.String()
	}
	res.Bind = "copy"
	if ia.ZeroCopy && ib.ZeroCopy {
		res.Bind = "zerocopy"
	}
	res.TxSkbBudget = min(ia.TxSkbBudget, ib.TxSkbBudget)
	res.MultiBuffer = ia.SG && ib.SG
	if sf := x.a.lay.spanFrames; sf > 0 {
		res.Chain = int(sf)
		res.Notes = append(res.Notes, fmt.Sprintf("multi-buffer: %d-byte chunks, each frame sent as a chain of up to %d descriptors from a TX span",
			x.a.lay.chunk, sf))
	}
	if ia.TxSkbBudgetErr != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("TX budget refused: %v", ia.TxSkbBudgetErr))
	}
	for _, h := range []*xskHost{x.a, x.b} {
		if h.att.NativeErr != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: native XDP refused (%v): generic mode", h.host.Port, h.att.NativeErr))
		}
	}
}

func (x *xskRaw) prepareRate(r *rateRun) error {
	a, b := x.a.sock, x.b.sock
	// Every frame of A's UMEM (or every TX span) gets the blast frame
	// once; the blaster then only stamps sequence numbers.
	if x.a.lay.spanFrames > 0 {
		spans := make([]uint64, 0, a.SpansCap())
		for {
			addr, ok := a.GetSpan()
			if !ok {
				break
			}
			spans = append(spans, addr)
			if _, err := r.tmpl.build(a.SpanBuf(addr), kindBlast, 0); err != nil {
				return err
			}
		}
		for _, addr := range spans {
			a.PutSpan(addr)
		}
	} else {
		chunk := uint64(x.a.lay.chunk)
		for i := uint64(0); i < umemFrames; i++ {
			if _, err := r.tmpl.build(a.FrameBuf(i*chunk), kindBlast, 0); err != nil {
				return err
			}
		}
	}
	_, err := b.Refill(b.Pool().Free())
	return err
}

func (x *xskRaw) blast(r *rateRun) error {
	if x.a.lay.spanFrames > 0 {
		return x.blastChains(r)
	}
	s := x.a.sock
	pool := s.Pool()
	t := &r.tmpl
	var descs [rawBatch]xsk.Desc
	var addrs [rawBatch]uint64
	var seq uint64
	for !r.stopTX.Load() {
		s.Complete()
		k := pool.GetN(addrs[:])
		if k == 0 {
			// Every frame is in the kernel's hands: push the TX ring.
			if err := s.KickTX(); err != nil {
				return err
			}
			continue
		}
		for i := 0; i < k; i++ {
			stamp(s.FrameBuf(addrs[i])[t.hdrLen:], seq+uint64(i))
			descs[i] = xsk.Desc{Addr: addrs[i], Len: uint32(t.frameLen)}
		}
		q, err := s.Transmit(descs[:k])
		if err != nil {
			return err
		}
		pool.PutN(addrs[q:k])
		seq += uint64(q)
		r.sent.Store(seq)
	}
	return x.drainTX()
}

// blastChains is blast for frames larger than a chunk: each is stamped in
// its TX span and sent as the chain Split cuts, rawBatch descriptors per
// Transmit (whole chains only).
func (x *xskRaw) blastChains(r *rateRun) error {
	s := x.a.sock
	pool := s.Pool()
	t := &r.tmpl
	sf := int(x.a.lay.spanFrames)
	descs := make([]xsk.Desc, rawBatch)
	perBatch := rawBatch / sf
	var seq uint64
	for !r.stopTX.Load() {
		s.Complete()
		m, k := 0, 0
		for ; k < perBatch; k++ {
			addr, ok := s.GetSpan()
			if !ok {
				break
			}
			stamp(s.SpanBuf(addr)[t.hdrLen:], seq+uint64(k))
			m += pool.Split(addr, uint32(t.frameLen), descs[m:])
		}
		if k == 0 {
			if err := s.KickTX(); err != nil {
				return err
			}
			continue
		}
		q, err := s.Transmit(descs[:m])
		if err != nil {
			return err
		}
		sent := 0
		for i, d := range descs[:m] {
			switch start := i == 0 || !descs[i-1].More(); {
			case i < q && !d.More():
				sent++
			case i >= q && start:
				s.PutSpan(d.Addr) // a chain that was not queued
			}
		}
		seq += uint64(sent)
		r.sent.Store(seq)
	}
	return x.drainTX()
}

// drainTX waits, up to drainTimeout, for the TX ring to empty.
func (x *xskRaw) drainTX() error {
	s := x.a.sock
	for end := time.Now().Add(drainTimeout); ; {
		s.Complete()
		if _, tx := s.InFlight(); tx == 0 || time.Now().After(end) {
			return nil
		}
		if err := s.KickTX(); err != nil {
			return err
		}
	}
}

func (x *xskRaw) sink(r *rateRun) error {
	s := x.b.sock
	pool := s.Pool()
	t := &r.tmpl
	var descs [rawBatch]xsk.Desc
	// A frame in several descriptors is verified from its chain in place:
	// the fields check reads are in its first buffer (3840 bytes), the
	// length is the chain's sum. The state survives the batch boundary.
	var inChain bool
	var seq uint64
	var ok bool
	var total int
	for !r.stopRX.Load() {
		m := s.Receive(descs[:])
		if m == 0 {
			continue
		}
		for _, d := range descs[:m] {
			f := s.Frame(d.Addr, d.Len)
			if !inChain {
				seq, ok = t.checkHead(f, kindBlast)
				total, inChain = 0, true
			}
			total += len(f)
			pool.Put(d.Addr)
			if d.More() {
				continue
			}
			inChain = false
			r.chk.observe(seq, ok && total == t.frameLen)
		}
		if _, err := s.Refill(m); err != nil {
			return err
		}
		r.received.Store(r.chk.received)
	}
	return nil
}

func (x *xskRaw) sinkCounters() (uint64, sockDrops, error) {
	c, err := x.b.prog.Counters()
	if err != nil {
		return 0, sockDrops{}, fmt.Errorf("xdp counters of %s: %w", x.b.host.Port, err)
	}
	st, err := x.b.sock.Stats()
	if err != nil {
		return 0, sockDrops{}, fmt.Errorf("socket stats of %s: %w", x.b.host.Port, err)
	}
	return c.Redirected, newSockDrops(st.RxFillRingEmptyDescs, st.RxRingFull, st.RxDropped, st.RxInvalidDescs), nil
}

func (x *xskRaw) prepareLatency(l *latRun) error {
	s := x.a.sock
	// Half the frames receive replies; the rest carry probes.
	_, err := s.Refill(s.Pool().Free() / 2)
	return err
}

func (x *xskRaw) ping(l *latRun) error {
	s := x.a.sock
	pool := s.Pool()
	t := &l.tmpl
	var rx [rawBatch]xsk.Desc
	var tx [1]xsk.Desc
	for i := 0; i < l.n && !l.stop.Load(); i++ {
		s.Complete()
		addr, ok := pool.Get()
		if !ok {
			return errors.New("pinger's frame pool is empty")
		}
		buf := s.FrameBuf(addr)
		copy(buf, l.probe)
		stamp(buf[t.hdrLen:], uint64(i))
		tx[0] = xsk.Desc{Addr: addr, Len: uint32(len(l.probe))}
		t0 := time.Now()
		if q, err := s.Transmit(tx[:]); err != nil || q == 0 {
			pool.Put(addr)
			if err != nil {
				return err
			}
			l.lost++
			continue
		}
		for got := false; !got; {
			m := s.Receive(rx[:])
			for _, d := range rx[:m] {
				seq, ok := t.check(s.Frame(d.Addr, d.Len), kindProbe, t.frameLen)
				if ok && seq == uint64(i) {
					l.samples = append(l.samples, time.Since(t0))
					got = true
				}
				pool.Put(d.Addr)
			}
			if m > 0 {
				if _, err := s.Refill(m); err != nil {
					return err
				}
			}
			if !got && (time.Since(t0) > probeTimeout || l.stop.Load()) {
				l.lost++
				break
			}
		}
	}
	return nil
}

func (x *xskRaw) reflect(l *latRun) error {
	s := x.b.sock
	pool := s.Pool()
	t := &l.tmpl
	var rx, tx [rawBatch]xsk.Desc
	for !l.stop.Load() {
		c := s.Complete()
		m := s.Receive(rx[:])
		k := 0
		for _, d := range rx[:m] {
			f := s.Frame(d.Addr, d.Len)
			if _, ok := t.check(f, kindProbe, t.frameLen); ok {
				turnAround(f, x.is6)
				tx[k] = d
				k++
			} else {
				pool.Put(d.Addr)
			}
		}
		if k > 0 {
			q, err := s.Transmit(tx[:k])
			if err != nil {
				return err
			}
			for _, d := range tx[q:k] {
				pool.Put(d.Addr)
			}
		}
		if m > 0 || c > 0 {
			if _, err := s.Refill(pool.Free()); err != nil {
				return err
			}
		}
	}
	return nil
}
