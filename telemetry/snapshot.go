package telemetry

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/afxdp"
	"github.com/metaroce/metaroce/dataplane/udplink"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/transport"
)

// Engine is what telemetry reads of one running engine. The daemon builds
// the list once; the engines, links and programs outlive every snapshot
// (the daemon stops serving telemetry before it closes them).
type Engine struct {
	Iface  string
	Engine *dataplane.Engine
	// AFXDP is the engine's link when it is an AF_XDP link; UDP when it is
	// a UDP-socket link; both nil for others (the in-memory twin).
	AFXDP *afxdp.Link
	UDP   *udplink.Link
	// XDP is the interface's steering program (shared by the interface's
	// engines, read once per interface), nil without one.
	XDP *bpf.Program
	// Planes: the engine's link on each plane, for an engine over several
	// (docs/spec.md §7.9; AFXDP and UDP above are plane 0's), and Mux the
	// PlaneLink that serves them as one.
	Planes []PlaneLink
	Mux    *dataplane.PlaneLink
}

// PlaneLink is an engine's link on one plane.
type PlaneLink struct {
	Plane int
	Iface string
	AFXDP *afxdp.Link
	UDP   *udplink.Link
}

// PlaneLinkSnapshot is an engine's link on one plane: its counters, as
// EngineSnapshot has them for the engine's whole link.
type PlaneLinkSnapshot struct {
	Plane int               `json:"plane"`
	Iface string            `json:"iface"`
	AFXDP *afxdp.Stats      `json:"afxdp,omitempty"` // engine-owned: only when Responsive
	UDP   *udplink.Counters `json:"udp,omitempty"`
	XSK   *xsk.Stats        `json:"xsk,omitempty"`
}

// Options choose what a snapshot holds.
type Options struct {
	// TopConns is how many connections per engine are reported one by one,
	// the ones that moved the most bytes (0: DefaultTopConns; negative:
	// none).
	TopConns int
	// Paths adds each reported connection's paths.
	Paths bool
}

// DefaultTopConns is how many connections per engine a snapshot lists
// when its caller does not say: ten show the heavy hitters of a host, and
// the totals and state counts cover the rest. (The Prometheus collector
// lists none: see the package doc.)
const DefaultTopConns = 10

// MaxTopConns bounds what a client may ask the stream for: each listed
// connection with 256 paths is ~40 KB of JSON per tick.
const MaxTopConns = 1024

// Snapshot is the daemon's state at one instant.
type Snapshot struct {
	Time    time.Time        `json:"time"`
	Engines []EngineSnapshot `json:"engines"`
	// Ifaces holds what is per interface: the XDP program's counters.
	Ifaces []IfaceSnapshot `json:"ifaces,omitempty"`
}

// IfaceSnapshot is one interface's XDP program counters.
type IfaceSnapshot struct {
	Name string        `json:"name"`
	XDP  *bpf.Counters `json:"xdp,omitempty"`
	Err  string        `json:"error,omitempty"`
}

// EngineCounters are dataplane.EngineStats, loaded.
type EngineCounters struct {
	Iterations uint64 `json:"iterations"`
	Sleeps     uint64 `json:"sleeps"`
	RxPackets  uint64 `json:"rx_packets"`
	TxPackets  uint64 `json:"tx_packets"`
	RxBatches  uint64 `json:"rx_batches"`
	TxBatches  uint64 `json:"tx_batches"`
	TxShort    uint64 `json:"tx_short"`
	// RxStamped packets carried the link's arrival time; RxWaitNanos is
	// their summed wait between arrival and the engine (host receive
	// delay, which AckDelay and RTT samples leave out: docs/spec.md §5.1).
	RxStamped   uint64 `json:"rx_stamped"`
	RxWaitNanos uint64 `json:"rx_wait_ns"`
	Forwarded   uint64 `json:"forwarded"`
	FromPeers   uint64 `json:"from_peers"`
	BusyNanos   uint64 `json:"busy_ns"`
	IdleNanos   uint64 `json:"idle_ns"`
	// CPU is the engine thread's CPU time (nil when it is not running).
	CPU *dataplane.EngineCPU `json:"cpu,omitempty"`
}

// EngineSnapshot is one engine: its queue, counters, connections.
type EngineSnapshot struct {
	Iface string             `json:"iface"`
	Queue int                `json:"queue"`
	Link  dataplane.LinkInfo `json:"link"`
	// Responsive says the engine ran the snapshot closure in time; when
	// false, only Engine, UDP and XSK (read from outside) are filled.
	Responsive bool           `json:"responsive"`
	Engine     EngineCounters `json:"engine"`

	Transport transport.Stats   `json:"transport"`
	AFXDP     *afxdp.Stats      `json:"afxdp,omitempty"`
	UDP       *udplink.Counters `json:"udp,omitempty"`
	XSK       *xsk.Stats        `json:"xsk,omitempty"`

	// Planes: the engine's link per plane, for an engine over several;
	// PlaneCopied and PlaneCopyDrops: the packets its PlaneLink copied to
	// another plane's link than their buffer's, and those it dropped for
	// want of room there (engine-owned: only when Responsive).
	Planes         []PlaneLinkSnapshot `json:"planes,omitempty"`
	PlaneCopied    uint64              `json:"plane_copied,omitempty"`
	PlaneCopyDrops uint64              `json:"plane_copy_drops,omitempty"`

	Conns ConnSummary `json:"conns"`
	// Top are the connections that moved the most bytes, most first.
	Top []ConnSnapshot `json:"top,omitempty"`
	// Stall is the longest the snapshot held the engine goroutine in one
	// visit: what reading the engine's state cost its dataplane at most.
	Stall time.Duration `json:"stall_ns"`
}

// ConnSummary counts every connection of an engine, and sums up the
// established ones in a few figures whose number does not grow with the
// connections (what the Prometheus collector exports of them).
type ConnSummary struct {
	Total int `json:"total"`
	// ByState counts connections by transport.State (index: the State
	// value; 0 unused).
	ByState      [transport.StateFailed + 1]int `json:"by_state"`
	PathsActive  int                            `json:"paths_active"`
	PathsSuspect int                            `json:"paths_suspect"`
	// Degraded counts established connections with at least one path
	// not active (suspect, or retired and waiting for its probe).
	Degraded int `json:"degraded"`
	// SRTTMax and HostDelayMax are the largest smoothed RTT and host
	// delay among established connections: the worst one, which the
	// live view (Top, metaroce qps) then names.
	SRTTMax      int64 `json:"srtt_max_ns"`
	HostDelayMax int64 `json:"host_delay_max_ns"`
	// FabricRTTMax is the largest fabric RTT (the congestion controller's
	// RTT, host delay left out) among them: beside HostDelayMax, it says
	// whether a slow round trip is the fabric's or the hosts'.
	FabricRTTMax int64 `json:"fabric_rtt_max_ns"`
	// Of the established connections with a congestion controller:
	// how many, the smallest window, and the slowest pacing rate among
	// those paced (0 when none is): the most throttled connection, which
	// metaroce qps names.
	CCConns        int    `json:"cc_conns"`
	CCWindowMin    int64  `json:"cc_window_min_bytes"`
	CCPacingMinBPS uint64 `json:"cc_pacing_min_bps"`
	// PlanesDown sums the connections' planes that are down (every path
	// on them suspect, docs/spec.md §8.7.4).
	PlanesDown int `json:"planes_down"`
}

// ConnSnapshot is one connection.
type ConnSnapshot struct {
	ID       uint32 `json:"id"`
	PeerID   uint32 `json:"peer_id"`
	Peer     string `json:"peer"`
	State    string `json:"state"`
	Sent     uint64 `json:"data_sent"`
	Retx     uint64 `json:"retransmitted"`
	Acked    uint64 `json:"acked"`
	Lost     uint64 `json:"lost"`
	Timeouts uint64 `json:"timeouts"`
	BytesOut uint64 `json:"bytes_sent"`
	Received uint64 `json:"data_received"`
	Dups     uint64 `json:"duplicates"`
	BytesIn  uint64 `json:"bytes_placed"`
	SRTT     int64  `json:"srtt_ns"`
	MinRTT   int64  `json:"min_rtt_ns"`
	// The congestion controller's RTT, host delay left out (the link's
	// arrival stamps: docs/spec.md §8.9.4), its minimum, and the host
	// delay (the peer's hold and this host's receive wait, smoothed).
	FabricRTT    int64 `json:"fabric_rtt_ns"`
	FabricMinRTT int64 `json:"fabric_min_rtt_ns"`
	HostDelay    int64 `json:"host_delay_ns"`

	PathsActive  int    `json:"paths_active"`
	PathsSuspect int    `json:"paths_suspect"`
	PathSRTTMin  int64  `json:"path_srtt_min_ns"` // over active paths with a sample
	PathSRTTMax  int64  `json:"path_srtt_max_ns"`
	Repaths      uint64 `json:"repaths"`
	PathLost     uint64 `json:"path_lost"`
	CEMarks      uint64 `json:"ce_marks"`

	Congestion *congestion.State `json:"congestion,omitempty"`
	Paths      []PathSnapshot    `json:"paths,omitempty"`
	// Planes: the planes the connection sprays over, when more than one
	// (docs/spec.md §7.9).
	Planes []PlaneSnapshot `json:"planes,omitempty"`
}

// PlaneSnapshot is one plane of a connection: the peer's address on it,
// its paths, how many of them carry data, and whether it is down (none
// does, §8.7.4) and for how long.
type PlaneSnapshot struct {
	Plane       int    `json:"plane"`
	Peer        string `json:"peer"`
	Paths       int    `json:"paths"`
	ActivePaths int    `json:"active_paths"`
	Down        bool   `json:"down"`
	// DownFor is how long the plane has been down, at the snapshot.
	DownFor int64 `json:"down_for_ns,omitempty"`
	// Unproven: the peer's address on the plane has not answered yet
	// (docs/spec.md §7.9); the plane is down until it does.
	Unproven bool `json:"unproven,omitempty"`
}

// Bytes is what ranks connections: bytes sent plus bytes placed.
func (c *ConnSnapshot) Bytes() uint64 { return c.BytesOut + c.BytesIn }

// PathSnapshot is one logical path of a connection.
type PathSnapshot struct {
	ID       int     `json:"id"`
	Entropy  uint16  `json:"entropy"`
	Plane    int     `json:"plane"`
	State    string  `json:"state"`
	InFlight int     `json:"inflight"`
	SRTT     int64   `json:"srtt_ns"`
	MinRTT   int64   `json:"min_rtt_ns"`
	MarkFrac float64 `json:"mark_frac"`
	LossRate float64 `json:"loss_rate"`
	Sent     uint64  `json:"sent"`
	Acked    uint64  `json:"acked"`
	Lost     uint64  `json:"lost"`
	Marked   uint64  `json:"marked"`
	Repaths  uint64  `json:"repaths"`
}

// ConnID formats a connection id as metrics labels and tables show it.
func ConnID(id uint32) string { return strconv.FormatUint(uint64(id), 16) }

// Take returns a snapshot of the engines. ctx bounds the whole of it; an
// engine whose closure has not run when ctx ends is marked unresponsive
// and the rest are still reported.
func Take(ctx context.Context, engines []Engine, opts Options) *Snapshot {
	if opts.TopConns == 0 {
		opts.TopConns = DefaultTopConns
	}
	opts.TopConns = min(opts.TopConns, MaxTopConns)
	s := &Snapshot{Time: time.Now(), Engines: make([]EngineSnapshot, len(engines))}
	seen := map[*bpf.Program]bool{}
	var wg sync.WaitGroup
	for i := range engines {
		en := &engines[i]
		es := &s.Engines[i]
		inf := en.Engine.Link().Info()
		es.Iface, es.Queue, es.Link = en.Iface, inf.Queue, inf
		st := &en.Engine.Stats
		es.Engine = EngineCounters{
			Iterations: st.Iterations.Load(), Sleeps: st.Sleeps.Load(),
			RxPackets: st.RxPackets.Load(), TxPackets: st.TxPackets.Load(),
			RxBatches: st.RxBatches.Load(), TxBatches: st.TxBatches.Load(),
			TxShort: st.TxShort.Load(), Forwarded: st.Forwarded.Load(), FromPeers: st.FromPeers.Load(),
			RxStamped: st.RxStamped.Load(), RxWaitNanos: st.RxWaitNanos.Load(),
			BusyNanos: st.BusyNanos.Load(), IdleNanos: st.IdleNanos.Load(),
			CPU: en.Engine.CPU(),
		}
		if en.UDP != nil {
			c := en.UDP.Counters()
			es.UDP = &c
		}
		if en.AFXDP != nil {
			if x, err := en.AFXDP.Socket().Stats(); err == nil {
				es.XSK = &x
			}
		}
		if len(en.Planes) > 1 {
			es.Planes = make([]PlaneLinkSnapshot, len(en.Planes))
			for p, pl := range en.Planes {
				ps := &es.Planes[p]
				ps.Plane, ps.Iface = pl.Plane, pl.Iface
				if pl.UDP != nil {
					c := pl.UDP.Counters()
					ps.UDP = &c
				}
				if pl.AFXDP != nil {
					if x, err := pl.AFXDP.Socket().Stats(); err == nil {
						ps.XSK = &x
					}
				}
			}
		}
		// The engines are walked in parallel, so one stuck engine costs
		// the others nothing but the shared deadline.
		wg.Go(func() {
			if w, err := walk(ctx, en, opts); err == nil {
				es.Responsive = true
				es.Transport, es.AFXDP, es.Conns, es.Top = w.s.Transport, w.s.AFXDP, w.s.Conns, w.s.Top
				es.Stall = w.s.Stall
				es.PlaneCopied, es.PlaneCopyDrops = w.s.PlaneCopied, w.s.PlaneCopyDrops
				for p := range w.s.Planes {
					if p < len(es.Planes) {
						es.Planes[p].AFXDP = w.s.Planes[p].AFXDP
					}
				}
			}
		})
		if en.XDP != nil && !seen[en.XDP] {
			seen[en.XDP] = true
			is := IfaceSnapshot{Name: en.Iface}
			if c, err := en.XDP.Counters(); err == nil {
				is.XDP = &c
			} else {
				is.Err = err.Error()
			}
			s.Ifaces = append(s.Ifaces, is)
		}
	}
	wg.Wait()
	return s
}

// walkChunk is how many connections one engine visit reads: each read
// misses the cache (~500 ns per connection measured with 10k of them), so
// a chunk holds the engine for about half a millisecond, and a scrape of a
// host with many connections costs its dataplane several short pauses
// instead of one long one.
var walkChunk = 1024 // a variable only so tests can make walks take many visits

// walker reads one engine's state over several visits to its goroutine.
// Every field is touched only inside closures that run there; the caller
// reads s only after the last visit returned, and abandons the walker
// (never touching it again) when a visit times out, so a visit that runs
// late writes into memory nobody reads.
type walker struct {
	en    *Engine
	opts  Options
	s     EngineSnapshot
	conns []*transport.Conn
	next  int
	// Top connections by bytes: a small array, replacing its smallest
	// entry, so the walk is O(conns) plus O(TopConns) per replacement.
	top      []*transport.Conn
	topBytes []uint64
	minAt    int
}

// walk takes an engine's snapshot: the counters and the connection list
// in a first visit, the connections walkChunk at a time, the top
// connections' details in a last one. The connections are therefore seen
// over a few iterations, not at one instant; each is read whole in one.
func walk(ctx context.Context, en *Engine, opts Options) (*walker, error) {
	w := &walker{en: en, opts: opts, minAt: -1}
	visit := func(f func()) error {
		return en.Engine.Do(ctx, func(transport.Time) {
			start := time.Now()
			f()
			w.s.Stall = max(w.s.Stall, time.Since(start))
		})
	}
	if err := visit(w.begin); err != nil {
		return nil, err
	}
	for w.next < len(w.conns) {
		if err := visit(w.step); err != nil {
			return nil, err
		}
	}
	if err := visit(w.finish); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *walker) begin() {
	ep := w.en.Engine.Endpoint()
	w.s.Transport = *ep.Stats()
	if w.en.AFXDP != nil {
		a := w.en.AFXDP.Stats
		w.s.AFXDP = &a
	}
	if len(w.en.Planes) > 1 {
		// The links' own counters are the engine's to write: read here.
		w.s.Planes = make([]PlaneLinkSnapshot, len(w.en.Planes))
		for p, pl := range w.en.Planes {
			if pl.AFXDP != nil {
				a := pl.AFXDP.Stats
				w.s.Planes[p].AFXDP = &a
			}
		}
		if m := w.en.Mux; m != nil {
			w.s.PlaneCopied, w.s.PlaneCopyDrops = m.Copied, m.CopyDrops
		}
	}
	w.conns = ep.AppendConns(make([]*transport.Conn, 0, ep.Conns()))
}

func (w *walker) step() {
	end := min(len(w.conns), w.next+walkChunk)
	s, n := &w.s, w.opts.TopConns
	for _, c := range w.conns[w.next:end] {
		// A connection released since begin still reads consistently
		// (its memory lives on); it is counted in its final state, with
		// no paths (the transport reuses a released one's).
		s.Conns.Total++
		if st := c.State(); int(st) < len(s.Conns.ByState) {
			s.Conns.ByState[st]++
		}
		a, k := c.PathCounts()
		s.Conns.PathsActive += a
		s.Conns.PathsSuspect += k - a
		cs := c.Stats()
		if c.State() == transport.StateEstablished {
			if a < k {
				s.Conns.Degraded++
			}
			s.Conns.SRTTMax = max(s.Conns.SRTTMax, int64(cs.SRTT))
			s.Conns.HostDelayMax = max(s.Conns.HostDelayMax, int64(cs.HostDelay))
			s.Conns.FabricRTTMax = max(s.Conns.FabricRTTMax, int64(cs.FabricRTT))
			if cc, ok := c.Congestion(); ok {
				if s.Conns.CCConns == 0 || int64(cc.Window) < s.Conns.CCWindowMin {
					s.Conns.CCWindowMin = int64(cc.Window)
				}
				if cc.PacingRate > 0 && (s.Conns.CCPacingMinBPS == 0 || cc.PacingRate < s.Conns.CCPacingMinBPS) {
					s.Conns.CCPacingMinBPS = cc.PacingRate
				}
				s.Conns.CCConns++
			}
		}
		s.Conns.PlanesDown += c.PlanesDown()
		if n <= 0 {
			continue
		}
		b := cs.BytesSent + cs.BytesPlaced
		switch {
		case len(w.top) < n:
			w.top = append(w.top, c)
			w.topBytes = append(w.topBytes, b)
			if len(w.top) == n {
				w.minAt = argmin(w.topBytes)
			}
		case b > w.topBytes[w.minAt]:
			w.top[w.minAt], w.topBytes[w.minAt] = c, b
			w.minAt = argmin(w.topBytes)
		}
	}
	w.next = end
}

func (w *walker) finish() {
	w.conns = nil
	if len(w.top) > 0 {
		w.s.Top = make([]ConnSnapshot, len(w.top))
		var paths []transport.PathInfo
		for i, c := range w.top {
			paths = c.Paths(paths[:0])
			w.s.Top[i] = connSnapshot(c, paths, w.opts.Paths, w.en.Engine.Now())
		}
		sortTop(w.s.Top)
	}
}

func argmin(v []uint64) int {
	m := 0
	for i := range v {
		if v[i] < v[m] {
			m = i
		}
	}
	return m
}

func connSnapshot(c *transport.Conn, paths []transport.PathInfo, withPaths bool, now transport.Time) ConnSnapshot {
	st := c.Stats()
	cs := ConnSnapshot{ID: c.LocalID(), PeerID: c.PeerID(), Peer: c.Peer().String(), State: c.State().String(),
		Sent: st.DataSent, Retx: st.Retransmitted, Acked: st.Acked, Lost: st.Lost, Timeouts: st.Timeouts,
		BytesOut: st.BytesSent, Received: st.DataReceived, Dups: st.Duplicates, BytesIn: st.BytesPlaced,
		SRTT: int64(st.SRTT), MinRTT: int64(st.MinRTT),
		FabricRTT: int64(st.FabricRTT), FabricMinRTT: int64(st.FabricMinRTT), HostDelay: int64(st.HostDelay)}
	a, n := c.PathCounts()
	cs.PathsActive, cs.PathsSuspect = a, n-a
	for _, p := range paths {
		cs.Repaths += p.Repaths
		cs.PathLost += p.Lost
		cs.CEMarks += p.Marked
		if p.State == transport.PathActive && p.SRTT > 0 {
			if cs.PathSRTTMin == 0 || int64(p.SRTT) < cs.PathSRTTMin {
				cs.PathSRTTMin = int64(p.SRTT)
			}
			cs.PathSRTTMax = max(cs.PathSRTTMax, int64(p.SRTT))
		}
		if withPaths {
			cs.Paths = append(cs.Paths, PathSnapshot{ID: p.ID, Entropy: p.Entropy, Plane: p.Plane,
				State: p.State.String(), InFlight: p.InFlight, SRTT: int64(p.SRTT), MinRTT: int64(p.MinRTT),
				MarkFrac: p.MarkFrac, LossRate: p.LossRate, Sent: p.Sent, Acked: p.Acked,
				Lost: p.Lost, Marked: p.Marked, Repaths: p.Repaths})
		}
	}
	if cc, ok := c.Congestion(); ok {
		cs.Congestion = &cc
	}
	if pl := c.Planes(nil); len(pl) > 1 {
		for _, p := range pl {
			ps := PlaneSnapshot{Plane: p.Plane, Peer: p.Peer.String(), Paths: p.Paths, ActivePaths: p.ActivePaths, Down: p.Down, Unproven: p.Unproven}
			if p.Down && now > p.DownSince {
				ps.DownFor = int64(now - p.DownSince)
			}
			cs.Planes = append(cs.Planes, ps)
		}
	}
	return cs
}

// sortTop orders connections by bytes, most first.
func sortTop(t []ConnSnapshot) {
	slices.SortFunc(t, func(a, b ConnSnapshot) int { return cmp.Compare(b.Bytes(), a.Bytes()) })
}
