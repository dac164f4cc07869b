package bench

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/internal/testnet"
)

// xskHost is one host of an xsk run: the steering program on its port and
// one socket on queue 0 of it.
type xskHost struct {
	host *testnet.Host
	prog *bpf.Program
	att  bpf.Attachment
	sock *xsk.Socket
}

// attachProgram loads the production steering program for port and
// attaches it to h's port through a bpf_link, on a thread inside h's
// namespace. It returns the interface index there. The caller closes prog.
func attachProgram(h *testnet.Host, port uint16) (prog *bpf.Program, att bpf.Attachment, ifindex int, err error) {
	prog, err = bpf.Load(bpf.Options{Port: port, Queues: 1})
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
	prog, att, ifindex, err := attachProgram(h, opts.Port)
	if err != nil {
		return nil, err
	}
	e := &xskHost{host: h, prog: prog, att: att}
	cfg := xsk.Config{
		FrameSize: umemChunk, NumFrames: umemFrames,
		FillSize: ringSize, CompletionSize: ringSize, RxSize: ringSize, TxSize: ringSize,
		TxSkbBudget: opts.TxSkbBudget,
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
	// Every frame of A's UMEM gets the blast frame once; the blaster
	// then only stamps sequence numbers.
	for i := uint64(0); i < umemFrames; i++ {
		if _, err := r.tmpl.build(a.FrameBuf(i*umemChunk), kindBlast, 0); err != nil {
			return err
		}
	}
	_, err := b.Refill(b.Pool().Free())
	return err
}

func (x *xskRaw) blast(r *rateRun) error {
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
	for !r.stopRX.Load() {
		m := s.Receive(descs[:])
		if m == 0 {
			continue
		}
		for _, d := range descs[:m] {
			r.chk.observe(t.check(s.Frame(d.Addr, d.Len), kindBlast, t.frameLen))
			pool.Put(d.Addr)
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
