package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// MultipathConfig is the scenario of `metaroce sim -scenario failover` and
// `-scenario degraded`: host A runs Conns connections to host B over a
// fabric of Paths parallel paths, each an output-queued link of its own
// rate, delay and buffer, chosen per packet by an ECMP hash of the UDP
// source port the sender cannot see. At FailAt, Fail paths are
// blackholed (failover), or one path is slowed by SlowFactor or made lossy
// by PathLoss (degraded). Acks come back over an identical fabric.
type MultipathConfig struct {
	Scenario   string // "failover" or "degraded"
	Paths      int
	Planes     int // the paths are split evenly over this many planes
	Fail       int
	FailPlane  int // with Planes > 1: fail every path of this plane instead (-1: off)
	FailAt     time.Duration
	SlowFactor float64
	PathLoss   float64
	Conns      int
	Messages   int // over all connections
	Size       int
	Seed       uint64
	// NICBps is each host's NIC rate; every fabric path runs at
	// 2 NICBps / Paths, so the fabric has twice the NIC's capacity
	// and losing a quarter of it still leaves the NIC the bottleneck.
	NICBps     float64
	Delay      time.Duration // per-path base propagation delay
	QueueBytes int
	Transport  transport.Config
	Limit      time.Duration
	// Bin is the goodput sampling interval.
	Bin time.Duration
}

// PathRow is one fabric path in a result.
type PathRow struct {
	Path    int    `json:"path"`
	Plane   int    `json:"plane"`
	Packets uint64 `json:"packets"`
	// PacketsAfter counts from the fault on.
	PacketsAfter uint64 `json:"packets_after_fault"`
	Failed       bool   `json:"failed,omitempty"`
	Slow         bool   `json:"degraded,omitempty"`
}

// MultipathResult extends Result with the path figures.
type MultipathResult struct {
	Result
	Paths             int     `json:"paths"`
	PathsFailed       int     `json:"paths_failed"`
	PathsRetired      uint64  `json:"paths_retired"`
	Repaths           uint64  `json:"repaths"`
	PathTimeouts      uint64  `json:"path_timeouts"`
	ProbesSent        uint64  `json:"probes_sent"`
	GoodputBeforeGbps float64 `json:"goodput_before_gbps"`
	GoodputAfterGbps  float64 `json:"goodput_after_gbps"`
	// Recovered: goodput came back to 90% of the after-fault level and
	// held, no message failed or was left incomplete, and every
	// connection that had work completed something again. RecoveryUs is
	// defined (and printed) only when it did.
	RecoveryUs float64 `json:"recovery_us,omitempty"`
	Recovered  bool    `json:"recovered"`
	SprayCV    float64 `json:"spray_cv"` // coefficient of variation of packets over healthy paths
	QueueDrops uint64  `json:"queue_drops"`
	// LogicalCV is the coefficient of variation of packets over all the
	// connections' logical paths: how evenly the scheduler sprays.
	LogicalCV float64 `json:"logical_path_cv"`
	// ConnStallUs is the longest any connection went after the fault
	// before its next completed message, over the connections that did
	// complete one (-1: one never completed again; then the field is not
	// printed and ConnsNeverResumed counts them).
	ConnStallUs       float64   `json:"-"`
	ConnStallUsJSON   *float64  `json:"conn_stall_us,omitempty"`
	ConnsNeverResumed int       `json:"conns_never_resumed"`
	MaxQueueBytes     int       `json:"queue_max_bytes"`
	PerPath           []PathRow `json:"per_path"`
	GoodputSeries     []float64 `json:"-"`
}

// Windows (documented in docs/sim.md): goodput before is the mean over
// the bins from 100 us after the first byte to the fault; goodput after is
// the mean over the second half of the time from the fault to the end of
// the transfer, when any recovery is long done; recovery_us is the time
// from the fault to the end of the first bin whose goodput is back at 90%
// of goodput after and stays there for the next two bins.

// RunMultipath runs the failover or degraded scenario.
func RunMultipath(cfg MultipathConfig) (*MultipathResult, error) {
	if cfg.Paths < 1 || cfg.Conns < 1 || cfg.Messages < cfg.Conns || cfg.Size <= 0 {
		return nil, errors.New("sim: paths, conns, messages (>= conns) and size must be positive")
	}
	if cfg.Fail < 0 || cfg.Fail > cfg.Paths {
		return nil, fmt.Errorf("sim: -fail %d of %d paths", cfg.Fail, cfg.Paths)
	}
	if cfg.Planes < 1 {
		cfg.Planes = 1
	}
	if cfg.NICBps == 0 {
		cfg.NICBps = 100e9
	}
	if cfg.Delay == 0 {
		cfg.Delay = 2 * time.Microsecond
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = 512 << 10
	}
	if cfg.Limit == 0 {
		cfg.Limit = 2 * time.Second
	}
	if cfg.Bin == 0 {
		cfg.Bin = 20 * time.Microsecond
	}
	start := time.Now()
	n := New(cfg.Seed)
	tc := cfg.Transport
	tc.Planes = cfg.Planes
	tc.Seed = cfg.Seed*2 + 1
	a, err := n.AddHost(netip.MustParseAddr("10.0.0.1"), tc, cfg.NICBps)
	if err != nil {
		return nil, err
	}
	tc.Seed = cfg.Seed*2 + 2
	b, err := n.AddHost(netip.MustParseAddr("10.0.0.2"), tc, cfg.NICBps)
	if err != nil {
		return nil, err
	}
	rate := 2 * cfg.NICBps / float64(cfg.Paths)
	planes := make([]int, cfg.Paths)
	mk := func(to *Host) []*Link {
		ls := make([]*Link, cfg.Paths)
		for i := range ls {
			// Paths differ a little in length, as real routes do.
			d := cfg.Delay + time.Duration(i%4)*100*time.Nanosecond
			ls[i] = NewLink(to, LinkConfig{RateBps: rate, Delay: d, QueueBytes: cfg.QueueBytes})
			planes[i] = i * cfg.Planes / cfg.Paths
		}
		return ls
	}
	fwd, rev := mk(b), mk(a)
	ef := NewECMP(fwd, planes, uint32(cfg.Seed)*2654435761)
	er := NewECMP(rev, planes, uint32(cfg.Seed)*2246822519+1)
	n.SetRoute(a, b, ef)
	n.SetRoute(b, a, er)

	failed := make([]bool, cfg.Paths)
	slow := make([]bool, cfg.Paths)
	switch cfg.Scenario {
	case "failover":
		if cfg.FailPlane >= 0 && cfg.Planes > 1 {
			for i := range failed {
				failed[i] = planes[i] == cfg.FailPlane
			}
		} else {
			for i := 0; i < cfg.Fail; i++ {
				failed[i] = true
			}
		}
	case "degraded":
		slow[0] = true
	default:
		return nil, fmt.Errorf("sim: unknown multipath scenario %q", cfg.Scenario)
	}
	n.At(Time(cfg.FailAt), func(now Time) {
		for i := range failed {
			if failed[i] {
				bh := func(Time, []byte) bool { return true }
				for _, l := range []*Link{fwd[i], rev[i]} {
					c := l.cfg
					c.Drop = bh
					l.SetLink(c)
				}
			}
			if slow[i] {
				for _, l := range []*Link{fwd[i], rev[i]} {
					c := l.cfg
					if cfg.SlowFactor > 1 {
						c.RateBps /= cfg.SlowFactor
						c.Delay = time.Duration(float64(c.Delay) * cfg.SlowFactor)
					}
					c.Loss = cfg.PathLoss
					l.SetLink(c)
				}
			}
		}
	})

	// B's region: one slot per message in flight on each connection.
	const perConn = 8
	region := make([]byte, cfg.Conns*perConn*cfg.Size)
	const base = 0x7e0000000000
	memB := transport.NewMemoryTable()
	memB.Add(&transport.Region{Key: 0xabcdef, Addr: base, Buf: region, Access: transport.AccessRemoteWrite})
	b.EP.Listen(service, memB)
	src := make([]byte, cfg.Size)
	rng := rand.New(rand.NewPCG(cfg.Seed, 3))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}

	res := &MultipathResult{Result: Result{Scenario: cfg.Scenario, Transport: string(tcMode(tc)), Op: "write",
		Seed: cfg.Seed, Messages: cfg.Messages, Size: cfg.Size}, Paths: cfg.Paths}
	var (
		conns     []*transport.Conn
		posted    int
		completed int
		postedAt  = map[uint64]Time{}
		fct       []float64
		slotFree  = make([][]bool, cfg.Conns)
		lastOK    Time
		// first successful completion of each connection after the fault
		firstAfter = make([]Time, cfg.Conns)
		hadWork    = make([]bool, cfg.Conns) // outstanding messages at the fault
		busy       = make([]int, cfg.Conns)
	)
	post := func(now Time, ci int, slot int) {
		if posted >= cfg.Messages {
			return
		}
		id := uint64(posted)
		posted++
		off := (ci*perConn + slot) * cfg.Size
		wr := transport.WorkRequest{WRID: id<<16 | uint64(ci)<<8 | uint64(slot), Stream: uint16(slot % 4), Local: src,
			RemoteAddr: base + uint64(off), RKey: 0xabcdef}
		if err := conns[ci].PostWrite(&wr); err != nil {
			posted--
			return
		}
		postedAt[wr.WRID] = now
		slotFree[ci][slot] = false
		busy[ci]++
	}
	a.OnCompletion = func(now Time, c transport.Completion) {
		switch c.Op {
		case transport.OpConnected:
			ci := len(conns)
			conns = append(conns, c.Conn)
			c.Conn.Context = ci
			slotFree[ci] = make([]bool, perConn)
			for s := 0; s < perConn; s++ {
				post(now, ci, s)
			}
		case transport.OpWrite:
			ci, slot := int(c.WRID>>8&0xff), int(c.WRID&0xff)
			if c.Status == transport.StatusOK {
				completed++
				lastOK = now
				if now >= Time(cfg.FailAt) && firstAfter[ci] == 0 {
					firstAfter[ci] = now
				}
				res.BytesVerified += int64(c.Bytes)
				fct = append(fct, float64(now-postedAt[c.WRID])/1e3)
			} else {
				res.MessagesFailed++
			}
			delete(postedAt, c.WRID)
			slotFree[ci][slot] = true
			busy[ci]--
			post(now, ci, slot)
		}
	}
	for i := 0; i < cfg.Conns; i++ {
		if _, err := a.EP.Connect(0, b.Addr, service, transport.NewMemoryTable()); err != nil {
			return nil, err
		}
	}
	a.Kick()
	atFault := make([]uint64, cfg.Paths)
	n.At(Time(cfg.FailAt), func(Time) {
		for ci := range busy {
			hadWork[ci] = busy[ci] > 0
		}
		copy(atFault, ef.Counts)
	})
	// Goodput series: bytes placed at B per bin.
	var series []float64
	var lastPlaced uint64
	var sample func(now Time)
	sample = func(now Time) {
		placed := b.EP.Stats().BytesPlaced
		series = append(series, float64(placed-lastPlaced)*8/float64(cfg.Bin))
		lastPlaced = placed
		if completed+res.MessagesFailed < cfg.Messages {
			n.At(now+Time(cfg.Bin), sample)
		}
	}
	n.At(Time(cfg.Bin), sample)
	n.Run(Time(cfg.Limit), func() bool { return completed+res.MessagesFailed == cfg.Messages })

	res.MessagesCompleted = completed
	res.MessagesLost = cfg.Messages - completed - res.MessagesFailed
	st := a.EP.Stats()
	res.PacketsSent, res.PacketsRetransmit = st.DataSent, st.DataRetransmitted
	res.SpuriousRetransmit, res.Timeouts = st.SpuriousRetx, st.Timeouts
	res.PathsRetired, res.PathTimeouts, res.ProbesSent = st.PathsRetired, st.PathTimeouts, st.ProbesSent
	var logical []float64
	for _, c := range conns {
		for _, p := range c.Paths(nil) {
			res.Repaths += p.Repaths
			logical = append(logical, float64(p.Sent))
		}
	}
	res.LogicalCV = cv(logical)
	res.AcksSent = b.EP.Stats().AcksSent
	if first := res.PacketsSent - res.PacketsRetransmit; first > 0 {
		res.RetransmitRatio = float64(res.PacketsRetransmit) / float64(first)
	}
	res.SimTimeus = float64(n.Now()) / 1e3
	if n.Now() > 0 {
		res.GoodputGbps = float64(res.BytesVerified*8) / float64(n.Now())
	}
	slices.Sort(fct)
	res.FCTP50us, res.FCTP99us = percentile(fct, 0.5), percentile(fct, 0.99)
	res.Events = n.Events
	for i := range fwd {
		if failed[i] {
			res.PathsFailed++
		}
		res.PerPath = append(res.PerPath, PathRow{Path: i, Plane: planes[i], Packets: ef.Counts[i],
			PacketsAfter: ef.Counts[i] - atFault[i], Failed: failed[i], Slow: slow[i]})
	}
	res.SprayCV = sprayCV(res.PerPath)
	for _, l := range fwd {
		res.QueueDrops += l.Stats.QueueDrops
		res.MaxQueueBytes = max(res.MaxQueueBytes, l.Stats.MaxQueueBytes)
	}
	// The series ends with the last successful completion: a connection
	// that stalls and fails later must not stretch "after" over idle time.
	if k := int(float64(lastOK)/float64(cfg.Bin)) + 1; k < len(series) {
		series = series[:k]
	}
	res.GoodputSeries = series
	res.windows(cfg)
	stall := 0.0
	for ci, t := range firstAfter {
		switch {
		case t > 0:
			stall = max(stall, float64(t-Time(cfg.FailAt))/1e3)
		case hadWork[ci]:
			res.ConnsNeverResumed++ // never completed anything again
		}
	}
	res.ConnStallUs = stall
	if res.ConnsNeverResumed > 0 {
		res.ConnStallUs = -1
	} else {
		res.ConnStallUsJSON = &stall
	}
	if res.MessagesFailed > 0 || res.MessagesLost > 0 || res.ConnsNeverResumed > 0 {
		res.Recovered, res.RecoveryUs = false, 0
	}
	res.WallS = time.Since(start).Seconds()
	if res.MessagesLost > 0 && res.Error == "" {
		res.Error = fmt.Sprintf("%d of %d messages not complete at the %v limit", res.MessagesLost, cfg.Messages, cfg.Limit)
	}
	return res, nil
}

func tcMode(tc transport.Config) transport.Mode {
	if tc.Mode == "" {
		return transport.ModeMetaRoCE
	}
	return tc.Mode
}

// windows computes goodput before and after the fault and the recovery
// time from the series (see the comment on the windows above).
func (r *MultipathResult) windows(cfg MultipathConfig) {
	s := r.GoodputSeries
	bin := float64(cfg.Bin)
	failBin := int(float64(cfg.FailAt) / bin)
	mean := func(lo, hi int) float64 {
		if lo < 0 {
			lo = 0
		}
		if hi > len(s) {
			hi = len(s)
		}
		if hi <= lo {
			return 0
		}
		t := 0.0
		for _, v := range s[lo:hi] {
			t += v
		}
		return t / float64(hi-lo)
	}
	warm := int(100e3 / bin)
	r.GoodputBeforeGbps = mean(warm, failBin)
	end := len(s) - 1 // the last bin is partial
	r.GoodputAfterGbps = mean(failBin+(end-failBin)/2, end)
	target := 0.9 * r.GoodputAfterGbps
	for i := failBin; i+2 < end; i++ {
		if s[i] >= target && s[i+1] >= target && s[i+2] >= target {
			r.RecoveryUs = float64(i+1-failBin) * bin / 1e3
			r.Recovered = true
			return
		}
	}
}

// sprayCV is the coefficient of variation of packets over the paths that
// were healthy all along.
func sprayCV(rows []PathRow) float64 {
	var v []float64
	for _, p := range rows {
		if !p.Failed && !p.Slow {
			v = append(v, float64(p.Packets))
		}
	}
	return cv(v)
}

func cv(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := 0.0
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	if m == 0 {
		return 0
	}
	ss := 0.0
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss/float64(len(v))) / m
}
