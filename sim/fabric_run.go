package sim

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// FabricConfig is a fabric scenario: a workload on a Clos fabric, with
// optional background load and a fault at a given time.
type FabricConfig struct {
	Clos     ClosConfig
	Workload string
	// Size: bytes per message (permutation, incast), per peer
	// (alltoall), or the buffer reduced (all-reduce).
	Size int
	// Fanin: incast senders (0: every other host).
	Fanin int
	// Window, for alltoall: each host has at most Window writes in
	// flight, to peers i+1, i+2, ... in turn, as a collective library
	// paces a large all-to-all; 0: every write posted at once.
	Window int
	// Lazy, with Window: connect to each peer when its turn comes (one
	// connection per direction) and close the connection when the write
	// completes, so a host holds about 2 x Window connections instead of
	// a full mesh (docs/scale.md).
	Lazy bool
	// Background is the load each host's NIC carries besides the
	// collective, as a fraction of its rate: BgSize-byte WRITEs to the
	// host N/2 away (so they cross the bisection) at Poisson arrivals.
	Background float64
	BgSize     int
	// Fault at FaultAt: "link-down" (a leaf uplink cable of plane 0),
	// "spine-down" (a spine of plane 0; a super-spine with three tiers),
	// "plane-down" (the last plane: needs Planes > 1), "degrade" (a leaf
	// uplink cable: rate divided by FaultFactor, loss FaultLoss).
	Fault       string
	FaultAt     time.Duration
	FaultFactor float64
	FaultLoss   float64
	Transport   transport.Config
	Limit       time.Duration
	// Bin is the goodput sampling interval.
	Bin time.Duration
}

// FabricTransport is the transport configuration of the fabric
// scenarios: the defaults, sized for a host with thousands of peers.
// Per connection the defaults hold about a megabyte (a 512-packet send
// window, 256 messages, 64 streams, 1024 path ids: docs/scale.md), which
// at a thousand peers per host is a gigabyte; a collective keeps one or
// two messages in flight per peer, so these windows lose nothing.
var FabricTransport = transport.Config{
	MTU:        4096, // RoCE's usual MTU in AI fabrics
	SendWindow: 64,   // 2x a 100 Gb/s x ~10 us bandwidth-delay product at 4 KiB
	RecvWindow: 128,  // twice the send window
	MsgWindow:  8,
	RecvQueue:  1, // WRITEs only: no receive buffers
	// 50 us, five unloaded round trips: the default 200 us floor is
	// for software timestamps (docs/spec.md §8.9.4); a fabric measured
	// like a NIC measures needs less, and both modes get the same.
	MinRTO:     50 * time.Microsecond,
	MaxStreams: 2,
	PathRing:   16, // SendWindow / Paths x 4, a power of two
	// Every host connects to hundreds of peers at the job's start; the
	// reply rate limit is for floods of strays, not for that.
	ResetRate: 1 << 20,
}

func (c *FabricConfig) fill() {
	d := ClosDefaults
	cc := &c.Clos
	if cc.Tiers == 0 {
		cc.Tiers = d.Tiers
	}
	if cc.Planes == 0 {
		cc.Planes = d.Planes
	}
	if cc.Oversub == 0 {
		cc.Oversub = d.Oversub
	}
	if cc.HostBps == 0 {
		cc.HostBps = d.HostBps
	}
	if cc.FabricBps == 0 {
		cc.FabricBps = cc.HostBps
	}
	if cc.HostDelay == 0 {
		cc.HostDelay = d.HostDelay
	}
	if cc.FabricDelay == 0 {
		cc.FabricDelay = d.FabricDelay
	}
	if cc.QueueBytes == 0 {
		cc.QueueBytes = d.QueueBytes
	}
	if cc.ECNBytes == 0 {
		cc.ECNBytes = d.ECNBytes
	}
	if c.Size == 0 {
		c.Size = 64 << 10
	}
	if c.BgSize == 0 {
		c.BgSize = 64 << 10
	}
	if c.FaultFactor == 0 {
		c.FaultFactor = 4
	}
	if c.Limit == 0 {
		c.Limit = 5 * time.Second
	}
	if c.Bin == 0 {
		c.Bin = 10 * time.Microsecond
	}
}

// fabricRun is one run's state.
type fabricRun struct {
	cfg     FabricConfig
	f       *Fabric
	ms      []fmsg
	conns   []map[int32]*transport.Conn // per host, by peer
	backlog [][]int32                   // per host: messages the window refused, to retry
	src     []byte
	pending int // collective messages not yet arrived and acked
	// dupArrivals counts messages whose arrival was reported twice.
	dupArrivals int
	// Windowed all-to-all: the connection of each message, and each
	// host's next peer (message q of host i is ms[q·N+i]).
	windowed bool
	lazy     bool
	wconn    []*transport.Conn
	cursor   []int
	mems     []*transport.MemoryTable
	failed   error
}

const fabricKey = 0x5eed
const fabricAddr = 0x7f0000000000

// RunFabric runs a fabric scenario.
func RunFabric(cfg FabricConfig) (*FabricResult, error) {
	cfg.fill()
	if cfg.Size < 1 || cfg.Background < 0 || cfg.Background >= 1 || cfg.Clos.Loss < 0 || cfg.Clos.Loss >= 1 {
		return nil, errors.New("sim: fabric: size positive, background and loss in [0, 1)")
	}
	wall := time.Now()
	tc := cfg.Transport
	tc.Planes = max(tc.Planes, cfg.Clos.Planes)
	if tc.Mode == transport.ModeRoCEv2 {
		tc.Planes = 1 // one path: its plane is the one its hash picks
	}
	if tc.Congestion == "" {
		tc.Congestion = DefaultCC(tc.Mode)
	}
	tc.LineRateBps = uint64(cfg.Clos.HostBps * float64(cfg.Clos.Planes))
	if tc.MaxPathID == 0 {
		// Path ids are 0..Paths-1 (a repath keeps the id): the default
		// 1024 costs 10 KiB per connection for nothing.
		tc.MaxPathID = max(tc.Paths, transport.Defaults.Paths)
	}
	if err := tc.Validate(); err != nil {
		return nil, err
	}
	mss := tc.MaxPayload()
	full := wire.DataLen + mss + wire.TrailerLen + WireOverhead
	rtt := cfg.Clos.BaseRTT(full, wire.AckLen+wire.TrailerLen+WireOverhead)
	tc.BaseRTT = transport.Duration(rtt)
	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	f, err := NewFabric(cfg.Clos, tc)
	if err != nil {
		return nil, err
	}
	cfg.Clos = f.Cfg
	ms, err := buildWorkload(cfg.Workload, cfg.Clos.Hosts, cfg.Size, cfg.Fanin, cfg.Clos.Seed)
	if err != nil {
		return nil, err
	}
	r := &fabricRun{cfg: cfg, f: f, ms: ms, pending: len(ms)}
	res := &FabricResult{Scenario: cfg.Workload, Topology: fmt.Sprintf("clos%d", cfg.Clos.Tiers),
		Transport: string(tc.Mode), CC: tc.Congestion, Seed: cfg.Clos.Seed, Hosts: cfg.Clos.Hosts,
		Planes: cfg.Clos.Planes, Radix: cfg.Clos.Radix, Switches: len(f.Net.switches), Size: cfg.Size,
		Loss: cfg.Clos.Loss, Messages: len(ms), BaseRTTus: float64(rtt) / 1e3, Fault: cfg.Fault}
	bgPeer := func(i int) int { return (i + cfg.Clos.Hosts/2) % cfg.Clos.Hosts }
	r.windowed = cfg.Window > 0 && cfg.Workload == WorkAllToAll
	r.lazy = r.windowed && cfg.Lazy
	pairs := r.pairs(cfg.Background > 0, bgPeer)
	res.Connections = len(pairs)
	if r.lazy && r.paired() {
		res.Connections += len(ms) / 2 // one per pair, opened in turn
	} else if r.lazy {
		res.Connections += len(ms) // one per message, opened in turn
	}
	r.setup(pairs)

	// Phase 1: connect every pair; phase 2 starts the workload.
	n := f.Net
	up := 0
	var start Time
	started := false
	for i, h := range f.Hosts {
		h.OnCompletion = func(now Time, c transport.Completion) { r.onCompletion(i, now, c, &up, &res.MessagesFailed) }
	}
	n.Run(Time(cfg.Limit), func() bool { return up == 2*len(pairs) || r.failed != nil })
	if r.failed == nil && up < 2*len(pairs) {
		r.failed = fmt.Errorf("%d of %d connection ends up at the limit", up, 2*len(pairs))
	}
	start = n.Now() + Time(time.Microsecond)
	res.SetupUs = float64(start) / 1e3
	res.IdealUs = idealNs(r.ms, cfg.Clos.Hosts, cfg.Clos.HostBps*float64(cfg.Clos.Planes)*float64(mss)/float64(full),
		f.bisectionBps()*float64(mss)/float64(full), func(m *fmsg) Time {
			// The first packet's latency; the rest pipeline behind it.
			return f.latency(m.src, m.dst, min(full, int(m.size)+full-mss))
		}) / 1e3
	// Memory per host: the live heap halfway through the ideal time,
	// when every window is open (and a lazy all-to-all holds its most
	// connections), less the heap before the fabric was built.
	n.At(start+Time(res.IdealUs*1e3/2), func(Time) {
		var ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		res.HeapPerHost = float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc)) / float64(cfg.Clos.Hosts)
	})

	carried0 := make([]uint64, len(f.FabricLinks)+len(f.HostLinks))
	allLinks := append(append([]*Link{}, f.FabricLinks...), f.HostLinks...)
	var series []float64
	var lastPlaced uint64
	placed := func() uint64 {
		var b uint64
		for _, h := range f.Hosts {
			b += h.EP.Stats().BytesPlaced
		}
		return b
	}
	var sample func(now Time)
	sample = func(now Time) {
		p := placed()
		series = append(series, float64(p-lastPlaced)*8/float64(cfg.Bin))
		lastPlaced = p
		if r.pending > 0 && r.failed == nil {
			n.At(now+Time(cfg.Bin), sample)
		}
	}
	n.At(start, func(now Time) {
		started = true
		for i, l := range allLinks {
			carried0[i] = l.Stats.Carried - uint64(l.Backlog(now))
		}
		lastPlaced = placed()
		n.At(now+Time(cfg.Bin), sample)
		if r.windowed {
			r.cursor = make([]int, len(f.Hosts))
			for i := range f.Hosts {
				for range cfg.Window {
					r.openNext(now, i)
				}
			}
		} else {
			for i := range r.ms {
				if !r.ms[i].blocked {
					r.post(now, int32(i))
				}
			}
		}
		for _, h := range f.Hosts {
			h.Kick()
		}
	})
	if cfg.Background > 0 {
		r.background(start, bgPeer)
	}
	target := r.faultTarget()
	if cfg.Fault != "" {
		if err := r.scheduleFault(start+Time(cfg.FaultAt), target); err != nil {
			return nil, err
		}
		res.FaultAtUs = float64(cfg.FaultAt) / 1e3
	}
	if r.failed == nil {
		n.Run(Time(cfg.Limit), func() bool { return started && r.pending == 0 || r.failed != nil })
	}
	end := n.Now()
	r.report(res, start, end, series, allLinks, carried0, target)
	if res.IdealUs > 0 {
		res.OverIdeal = res.CollectiveUs / res.IdealUs
	}
	res.SimTimeus = float64(end) / 1e3
	res.Events = n.Events
	res.WallS = time.Since(wall).Seconds()
	if res.WallS > 0 {
		res.EventsPerSec = float64(n.Events) / res.WallS
	}
	if r.failed != nil {
		res.Error = r.failed.Error()
	} else if res.MessagesLost > 0 && end >= Time(cfg.Limit) {
		res.Error = fmt.Sprintf("%d of %d messages not complete at the %v limit", res.MessagesLost, res.Messages, cfg.Limit)
	} else if res.MessagesLost > 0 {
		// Nothing left to do and no timer armed: a connection stalled.
		res.Error = fmt.Sprintf("%d of %d messages never completed: the fabric went idle at %.0f us with no timer armed",
			res.MessagesLost, res.Messages, float64(end)/1e3)
	}
	return res, nil
}

// bisectionBps is the bandwidth, one way, between the hosts below N/2
// and the rest: the smaller of their NICs and the leaves' uplinks.
func (f *Fabric) bisectionBps() float64 {
	c := &f.Cfg
	half := float64(c.Hosts/2) * float64(c.Planes)
	return min(half*c.HostBps, half/float64(f.H)*float64(f.U)*c.FabricBps)
}

// pairs lists the host pairs that need a connection (lower index first).
func (r *fabricRun) pairs(bg bool, bgPeer func(int) int) [][2]int32 {
	seen := map[[2]int32]bool{}
	var out [][2]int32
	addPair := func(a, b int32) {
		if a > b {
			a, b = b, a
		}
		if k := [2]int32{a, b}; a != b && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, m := range r.ms {
		if !r.lazy {
			addPair(m.src, m.dst)
		}
	}
	if bg {
		for i := range r.f.Hosts {
			addPair(int32(i), int32(bgPeer(i)))
		}
	}
	return out
}

// setup gives every host one region (all writes to a host land in the
// same bytes: the collective's data is not checked here, the transport's
// own tests check placement) and connects each pair, lower index first.
func (r *fabricRun) setup(pairs [][2]int32) {
	hosts := r.f.Hosts
	size := max(r.cfg.Size, r.cfg.BgSize)
	r.src = make([]byte, size)
	r.conns = make([]map[int32]*transport.Conn, len(hosts))
	r.backlog = make([][]int32, len(hosts))
	mems := make([]*transport.MemoryTable, len(hosts))
	r.mems = mems
	if r.lazy {
		r.wconn = make([]*transport.Conn, len(r.ms))
	}
	for i, h := range hosts {
		r.conns[i] = map[int32]*transport.Conn{}
		mems[i] = transport.NewMemoryTable()
		mems[i].Add(&transport.Region{Key: fabricKey, Addr: fabricAddr, Buf: make([]byte, size),
			Access: transport.AccessRemoteWrite})
		h.EP.Listen(service, mems[i])
	}
	for _, p := range pairs {
		a, b := hosts[p[0]], hosts[p[1]]
		if _, err := a.EP.Connect(0, b.Addr, service, mems[p[0]]); err != nil {
			r.fail(err)
			return
		}
	}
	for _, h := range hosts {
		h.Kick()
	}
}
