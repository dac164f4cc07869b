package demo

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// TCPFabricResult is the Linux TCP run over the same fabric and the same
// cut, measured with the same windows as metaroce's.
type TCPFabricResult struct {
	Flows         int     `json:"flows"`
	GoodputBefore float64 `json:"goodput_before_gbps"`
	GoodputDuring float64 `json:"goodput_during_gbps"`
	GoodputAfter  float64 `json:"goodput_after_gbps"`
	RecoveryMs    float64 `json:"recovery_ms"` // of the aggregate; -1 if never
	Recovered     bool    `json:"recovered"`
	StallMs       float64 `json:"stall_ms_after_cut"` // of the aggregate
	// Stalled is the flows whose goodput in the after window was below a
	// tenth of their own before the cut: the ones hashed onto the dead
	// spine (in either direction: data or acks).
	Stalled int `json:"flows_stalled"`
	// OnCutSpine is the flows the leaves hash onto the cut spine, data or
	// acks: the ones expected to stall.
	OnCutSpine int `json:"flows_on_cut_spine"`
	// TxRehash is net.core.txrehash on the two hosts. The leaves hash
	// headers (testnet clears the socket's hash at their ingress), so a
	// new socket hash after a timeout cannot move a flow; the demo still
	// turns it off by default so that nothing but the fabric decides.
	TxRehash     bool         `json:"txrehash"`
	PerFlow      []TCPFlow    `json:"per_flow"`
	SpinePackets []SpineShare `json:"spine_packets"`
	Series       []Point      `json:"series,omitempty"`
}

// TCPFlow is one flow's goodput in the before and after windows.
type TCPFlow struct {
	Before  float64 `json:"before_gbps"`
	After   float64 `json:"after_gbps"`
	Stalled bool    `json:"stalled"`
	// SpineData and SpineAcks are the spines the leaves hash the flow's
	// data and its acks onto, from their route lookup (ip route get with
	// the flow's ports); -1 if it failed. Linux's header hash is
	// symmetric, so they agree.
	SpineData int `json:"spine_data"`
	SpineAcks int `json:"spine_acks"`
}

// runTCPFabric runs o.tcpFlows Linux TCP connections from a to b for
// o.before + o.after, fails the same spine the same way at o.before, and
// samples every flow's received bytes every o.sample (bench/tcp.go's
// method: a Go sender and receiver per connection, sockets opened on a
// thread inside each host's namespace).
func runTCPFabric(f *testnet.LeafSpine, a, b *testnet.Host, o leafSpineOpts) (*TCPFabricResult, error) {
	res := &TCPFabricResult{Flows: o.tcpFlows, TxRehash: o.tcpRehash, RecoveryMs: -1}
	if !o.tcpRehash {
		for _, h := range []*testnet.Host{a, b} {
			if err := h.Sysctl(map[string]string{"net.core.txrehash": "0"}); err != nil {
				return res, fmt.Errorf("txrehash off in %s: %w", h.Name, err)
			}
		}
	}
	dst := b.IPv4
	if o.ipv6 {
		dst = b.IPv6
	}
	addr := netip.AddrPortFrom(dst, 18600)
	var ln *net.TCPListener
	if err := b.Do(func() error {
		var err error
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		return res, err
	}
	defer ln.Close()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var senders, receivers []net.Conn
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Do(func() error {
		var d net.Dialer
		for range o.tcpFlows {
			c, err := d.DialContext(ctx, "tcp", addr.String())
			if err != nil {
				return err
			}
			conns = append(conns, c)
			senders = append(senders, c)
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	ln.SetDeadline(time.Now().Add(5 * time.Second))
	for range o.tcpFlows {
		c, err := ln.Accept()
		if err != nil {
			return res, fmt.Errorf("accept: %w", err)
		}
		conns = append(conns, c)
		receivers = append(receivers, c)
	}

	// Each flow's spines, looked up before any traffic so the lookups do
	// not compete with it.
	spines := make([][2]int, len(senders))
	for i, c := range senders {
		lp := uint16(c.LocalAddr().(*net.TCPAddr).Port)
		src := a.IPv4
		if o.ipv6 {
			src = a.IPv6
		}
		d, err := f.SpineOf(a, dst, "tcp", lp, addr.Port())
		if err != nil {
			d = -1
		}
		k, err := f.SpineOf(b, src, "tcp", addr.Port(), lp)
		if err != nil {
			k = -1
		}
		spines[i] = [2]int{d, k}
	}
	recv := make([]atomic.Int64, o.tcpFlows)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var failed errOnce
	for i, c := range receivers {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for {
				n, err := c.Read(buf)
				recv[i].Add(int64(n))
				if err != nil {
					if !stop.Load() {
						failed.set(fmt.Errorf("receive: %w", err))
					}
					return
				}
			}
		})
	}
	for _, c := range senders {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for !stop.Load() {
				if _, err := c.Write(buf); err != nil {
					if !stop.Load() {
						failed.set(fmt.Errorf("send: %w", err))
					}
					return
				}
			}
		})
	}
	// Closing the connections unblocks every Read and Write.
	end := func() {
		stop.Store(true)
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}

	c0, err := f.SpineCounts()
	if err != nil {
		end()
		return res, err
	}
	var cCut []testnet.SpineCount
	start := time.Now()
	var cutAt time.Time
	var cutting bool
	cutc := make(chan cutDone, 1)
	var agg []sample
	per := make([][]sample, o.tcpFlows)
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	for time.Since(start) < o.before+o.after {
		<-tick.C
		now := time.Now()
		var sum int64
		for i := range recv {
			v := recv[i].Load()
			sum += v
			per[i] = append(per[i], sample{now, v})
		}
		agg = append(agg, sample{now, sum})
		if !cutting && now.Sub(start) >= o.before {
			cutting = true
			go func() { cutc <- cutSpine(f, o) }()
		}
		select {
		case c := <-cutc:
			cutAt, cCut, err = c.at, c.counts, c.err
		default:
		}
		if err != nil {
			break
		}
	}
	if cutting && cutAt.IsZero() && err == nil {
		c := <-cutc
		cutAt, cCut, err = c.at, c.counts, c.err
	}
	end()
	if err != nil {
		return res, err
	}
	if err := failed.get(); err != nil {
		return res, err
	}
	c1, err := f.SpineCounts()
	if err != nil {
		return res, err
	}
	res.SpinePackets = spineShares(c0, cCut, c1)
	elapsed := o.before + o.after
	m := measure(agg, start, cutAt, elapsed, o.sample)
	res.GoodputBefore, res.GoodputDuring, res.GoodputAfter = m.before, m.during, m.after
	res.RecoveryMs, res.Recovered, res.Series, res.StallMs = m.recoveryMs, m.recovered, m.series, m.stallMs
	for i := range per {
		pm := measure(per[i], start, cutAt, elapsed, o.sample)
		fl := TCPFlow{Before: pm.before, After: pm.after, Stalled: pm.after < pm.before/10,
			SpineData: spines[i][0], SpineAcks: spines[i][1]}
		if fl.Stalled {
			res.Stalled++
		}
		if fl.SpineData == o.cutSpine || fl.SpineAcks == o.cutSpine {
			res.OnCutSpine++
		}
		res.PerFlow = append(res.PerFlow, fl)
	}
	return res, nil
}
