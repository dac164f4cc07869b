package sim

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// The congestion scenarios (incast, fairness, mixed) share one topology:
// senders behind one output-queued switch port towards a receiver. Each
// sender's NIC serialises at RateBps onto its access link; the switch port
// towards the receiver (the shared Link "bottleneck") is FIFO at RateBps
// with a finite buffer, DCTCP-style step ECN marking at ECNBytes and tail
// drop. Every sender's access link has the same delay, so the port sees
// the packets in the order they leave the NICs and the access hop folds
// into the port's delay. Acks return on uncongested links.

// CCConfig configures a congestion scenario.
type CCConfig struct {
	Scenario string // "incast", "fairness" or "mixed"
	// CC is the congestion controller (transport.Config.Congestion);
	// empty: Transport.Congestion if set, else DefaultCC.
	CC string
	// Senders: incast's senders, fairness's flows, mixed's long flows.
	Senders int
	// Size: the bytes each incast sender writes per round; the size of
	// the long flows' messages in fairness and mixed.
	Size int
	// Rounds of incast: each starts when the previous one completed.
	Rounds int
	// JoinEvery: in fairness, flow i starts at i x JoinEvery.
	JoinEvery time.Duration
	// ShortSize and ShortEvery: in mixed, one more sender writes
	// ShortSize-byte messages at Poisson arrivals ShortEvery apart on
	// average.
	ShortSize  int
	ShortEvery time.Duration
	// Duration of fairness (after the last join) and of mixed.
	Duration time.Duration
	// RateBps of every NIC and of the bottleneck; HopDelay is each hop's
	// propagation delay (sender to switch, switch to receiver, and back).
	RateBps  float64
	HopDelay time.Duration
	// QueueBytes and ECNBytes: the bottleneck's buffer and its marking
	// threshold.
	QueueBytes, ECNBytes int
	// Loss is random loss at the bottleneck (besides its tail drops).
	Loss      float64
	Seed      uint64
	Transport transport.Config
	// Limit bounds virtual time.
	Limit time.Duration
}

// CCDefaults are the scenarios' defaults: a 100 Gb/s single-switch
// fabric of 2 us hops (an unloaded RTT of about 8.4 us), a 1 MiB port
// buffer (a shallow-buffer switch's dynamic share for one port) marking
// above 100 KB (DCTCP's K at 100 Gb/s: above C x RTT / 7 = 15 KB, with
// room for the bursts of many senders).
var CCDefaults = CCConfig{
	Senders: 32, Size: 256 << 10, Rounds: 1,
	JoinEvery: 500 * time.Microsecond, ShortSize: 4 << 10, ShortEvery: 20 * time.Microsecond,
	Duration: 2 * time.Millisecond, RateBps: 100e9, HopDelay: 2 * time.Microsecond,
	QueueBytes: 1 << 20, ECNBytes: 100_000, Limit: time.Second,
}

// ClassFCT is one message class's completion times.
type ClassFCT struct {
	Class      string  `json:"class"`
	Size       int     `json:"size"`
	Messages   int     `json:"messages"`
	FCTP50us   float64 `json:"fct_p50_us"`
	FCTP99us   float64 `json:"fct_p99_us"`
	IdealFCTus float64 `json:"ideal_fct_us"`
	// P99OverIdeal is FCTP99us / IdealFCTus.
	P99OverIdeal float64 `json:"p99_over_ideal"`
}

// CCResult is a congestion scenario's report.
type CCResult struct {
	Scenario string `json:"scenario"`
	CC       string `json:"cc"`
	Seed     uint64 `json:"seed"`
	Senders  int    `json:"senders"`
	Size     int    `json:"size"`

	MessagesCompleted int    `json:"messages_completed"`
	MessagesLost      int    `json:"messages_lost"`
	MessagesFailed    int    `json:"messages_failed"`
	Timeouts          uint64 `json:"timeouts"`
	PacketsSent       uint64 `json:"packets_sent"`
	PacketsRetransmit uint64 `json:"packets_retransmitted"`
	QueueDrops        uint64 `json:"queue_drops"`
	Marked            uint64 `json:"ecn_marked"`
	QueueMaxBytes     int    `json:"queue_max_bytes"`
	QueueP50Bytes     int    `json:"queue_p50_bytes"`
	QueueP99Bytes     int    `json:"queue_p99_bytes"`
	// Utilisation is the bottleneck's busy fraction over the measured
	// interval; GoodputGbps the payload delivered through it.
	Utilisation float64 `json:"utilisation"`
	GoodputGbps float64 `json:"goodput_gbps"`
	BaseRTTus   float64 `json:"base_rtt_us"`

	// All messages (incast), or per class (mixed: short and long).
	FCTP50us     float64    `json:"fct_p50_us"`
	FCTP99us     float64    `json:"fct_p99_us"`
	IdealFCTus   float64    `json:"ideal_fct_us"`
	P99OverIdeal float64    `json:"p99_over_ideal"`
	Classes      []ClassFCT `json:"classes,omitempty"`

	// Fairness: Jain's index over the flows' goodput in windows of
	// WindowRTTs base RTTs; ConvergeRTTs[k] is how many base RTTs after
	// flow k+1 joined the first window with an index >= 0.95 ended (-1:
	// never); JainFairness is the mean index over the windows from
	// SettleRTTs after each join to the next.
	JainFairness float64   `json:"jain_fairness,omitempty"`
	JainMin      float64   `json:"jain_min_settled,omitempty"`
	ConvergeRTTs []float64 `json:"converge_rtts,omitempty"`
	WindowRTTs   float64   `json:"window_rtts,omitempty"`
	SettleRTTs   float64   `json:"settle_rtts,omitempty"`
	FlowGbps     []float64 `json:"flow_gbps,omitempty"`

	SimTimeus float64 `json:"sim_time_us"`
	Events    uint64  `json:"events"`
	WallS     float64 `json:"wall_s"`
	Error     string  `json:"error,omitempty"`
}

// star is the shared topology of the congestion scenarios.
type star struct {
	cfg        CCConfig
	n          *Network
	recv       *Host
	senders    []*Host
	bottleneck *Link
	mem        *transport.MemoryTable
	regionOf   map[netip.Addr]regionSpan
	rconn      map[netip.Addr]*transport.Conn // the receiver's side of each connection
	baseRTT    Time
	mss        int
	failed     error
}

type regionSpan struct {
	addr uint64
	key  uint32
	size int
}

const ccRegionBase = 0x7e0000000000

func (c *CCConfig) fill() error {
	d := CCDefaults
	switch c.Scenario {
	case "fairness":
		// Four flows of 64 KiB messages: fine-grained enough that a
		// window of ten RTTs sees each flow's rate, not its messages.
		d.Senders, d.Size = 4, 64<<10
	case "mixed":
		// Four long flows of 1 MiB messages against the short ones.
		d.Senders, d.Size = 4, 1<<20
	}
	setI := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setI(&c.Senders, d.Senders)
	setI(&c.Size, d.Size)
	setI(&c.Rounds, d.Rounds)
	setI(&c.ShortSize, d.ShortSize)
	setI(&c.QueueBytes, d.QueueBytes)
	setI(&c.ECNBytes, d.ECNBytes)
	setD(&c.JoinEvery, d.JoinEvery)
	setD(&c.ShortEvery, d.ShortEvery)
	setD(&c.Duration, d.Duration)
	setD(&c.HopDelay, d.HopDelay)
	setD(&c.Limit, d.Limit)
	if c.RateBps == 0 {
		c.RateBps = d.RateBps
	}
	if c.Senders < 1 || c.Senders > 4096 || c.Size < 1 || c.Rounds < 1 || c.ShortSize < 1 ||
		c.QueueBytes < 0 || c.ECNBytes < 0 || c.RateBps < 0 || c.Loss < 0 || c.Loss >= 1 {
		return fmt.Errorf("sim: %s: senders 1..4096, sizes and rounds positive, loss in [0, 1)", c.Scenario)
	}
	if c.CC == "" && c.Transport.Congestion == "" {
		c.CC = DefaultCC(c.Transport.Mode)
	}
	if c.CC != "" {
		c.Transport.Congestion = c.CC
	}
	tc := c.Transport
	if err := tc.Validate(); err != nil {
		return err
	}
	c.CC = tc.Congestion
	return nil
}

// DefaultCC is the simulator's congestion controller for a transport
// mode: metaroce, and dcqcn for the rocev2 baseline (classic RoCE's
// controller). The simulator's timestamps carry no host delay, as NIC
// timestamps would not; the transport's own default is none for the
// software dataplane's sake (transport.Defaults).
func DefaultCC(m transport.Mode) string {
	if m == transport.ModeRoCEv2 {
		return "dcqcn"
	}
	return "metaroce"
}

// newStar builds the receiver, `senders` sending hosts, and the links.
// Each sender gets a region of regionBytes on the receiver.
func newStar(cfg CCConfig, senders, regionBytes int) (*star, error) {
	s := &star{cfg: cfg, n: New(cfg.Seed), regionOf: map[netip.Addr]regionSpan{},
		rconn: map[netip.Addr]*transport.Conn{}, mem: transport.NewMemoryTable()}
	tc := cfg.Transport
	tc.LineRateBps = uint64(cfg.RateBps)
	tc.Seed = cfg.Seed*1000 + 1
	recv, err := s.n.AddHost(netip.MustParseAddr("10.0.0.1"), tc, cfg.RateBps)
	if err != nil {
		return nil, err
	}
	s.recv = recv
	s.bottleneck = NewLink(recv, LinkConfig{RateBps: cfg.RateBps, QueueBytes: cfg.QueueBytes,
		ECNBytes: cfg.ECNBytes, Delay: 2 * cfg.HopDelay, Loss: cfg.Loss})
	for i := range senders {
		tc.Seed = cfg.Seed*1000 + uint64(i) + 2
		a := netip.AddrFrom4([4]byte{10, 0, byte(1 + i>>8), byte(i)})
		h, err := s.n.AddHost(a, tc, cfg.RateBps)
		if err != nil {
			return nil, err
		}
		s.n.SetRoute(h, recv, s.bottleneck)
		s.n.Connect(recv, h, LinkConfig{Delay: 2 * cfg.HopDelay})
		span := regionSpan{addr: ccRegionBase + uint64(i)<<32, key: uint32(i)*0x9e3779b1 | 1, size: regionBytes}
		s.mem.Add(&transport.Region{Key: span.key, Addr: span.addr, Buf: make([]byte, regionBytes),
			Access: transport.AccessRemoteWrite})
		s.regionOf[a] = span
		s.senders = append(s.senders, h)
	}
	recv.EP.Listen(service, s.mem)
	recv.OnCompletion = func(now Time, c transport.Completion) {
		if c.Op == transport.OpConnected {
			s.rconn[c.Conn.Peer()] = c.Conn
		}
	}
	s.mss = recv.EP.Config().MaxPayload()
	// The unloaded RTT of a full packet: its serialisation at the NIC
	// and at the port, four hops, and the ack's serialisation.
	ser := func(b int) Time { return Time(float64((b+WireOverhead)*8) / cfg.RateBps * 1e9) }
	full := wire.DataLen + s.mss + wire.TrailerLen
	s.baseRTT = 2*ser(full) + ser(wire.AckLen+wire.TrailerLen) + 4*Time(cfg.HopDelay)
	return s, nil
}

// connect opens a connection from every sender and calls start once all
// are established.
func (s *star) connect(conns []*transport.Conn, start func(now Time)) error {
	up := 0
	for i, h := range s.senders {
		h.OnCompletion = func(now Time, c transport.Completion) {
			switch c.Op {
			case transport.OpConnected:
				conns[i] = c.Conn
				if up++; up == len(s.senders) {
					s.n.At(now+Time(time.Microsecond), start)
				}
			case transport.OpClosed:
				s.fail(fmt.Errorf("sender %d: connection closed: %v", i, c.Conn.Err))
			}
		}
		if _, err := h.EP.Connect(0, s.recv.Addr, service, transport.NewMemoryTable()); err != nil {
			return err
		}
		h.Kick()
	}
	return nil
}

func (s *star) fail(err error) {
	if s.failed == nil {
		s.failed = err
	}
}

// goodputRate is the payload rate a link of RateBps carries in full
// packets: what an ideal transport gets out of it.
func (s *star) goodputRate() float64 {
	full := wire.DataLen + s.mss + wire.TrailerLen + WireOverhead
	return s.cfg.RateBps * float64(s.mss) / float64(full)
}

// idealFCT is size bytes at rate bits/s plus one base RTT, in us.
func (s *star) idealFCT(size int, rate float64) float64 {
	return (float64(size)*8/rate*1e9 + float64(s.baseRTT)) / 1e3
}

// finish fills the counters every congestion scenario reports.
func (s *star) finish(res *CCResult, wallStart time.Time) {
	for _, h := range append([]*Host{s.recv}, s.senders...) {
		st := h.EP.Stats()
		res.Timeouts += st.Timeouts
		res.PacketsSent += st.DataSent
		res.PacketsRetransmit += st.DataRetransmitted
	}
	b := &s.bottleneck.Stats
	res.QueueDrops, res.Marked = b.QueueDrops, b.Marked
	res.QueueMaxBytes = b.MaxQueueBytes
	// The histogram gives a bucket's upper edge; no quantile is above
	// the largest backlog actually seen.
	res.QueueP50Bytes = min(b.Queue.Quantile(0.50), b.MaxQueueBytes)
	res.QueueP99Bytes = min(b.Queue.Quantile(0.99), b.MaxQueueBytes)
	res.BaseRTTus = float64(s.baseRTT) / 1e3
	res.SimTimeus = float64(s.n.Now()) / 1e3
	res.Events = s.n.Events
	res.WallS = time.Since(wallStart).Seconds()
	if s.failed != nil && res.Error == "" {
		res.Error = s.failed.Error()
	}
}

// sent is what the bottleneck has put on the wire by now: what it took
// in, less what is still queued.
func (s *star) sent() float64 {
	return float64(s.bottleneck.Stats.Carried) - float64(s.bottleneck.Backlog(s.n.Now()))
}

// placed is the payload placed at the receiver so far, over all
// connections.
func (s *star) placed() uint64 {
	var b uint64
	for _, h := range s.senders {
		if c := s.rconn[h.Addr]; c != nil {
			b += c.Stats().BytesPlaced
		}
	}
	return b
}

// utilisation is the bottleneck's busy fraction between t0, when sent()
// was sent0, and now.
func (s *star) utilisation(sent0 float64, t0 Time) float64 {
	t1 := s.n.Now()
	if t1 <= t0 {
		return 0
	}
	return (s.sent() - sent0) * 8 / s.cfg.RateBps / (float64(t1-t0) / 1e9)
}

func fctStats(fct []float64) (p50, p99 float64) {
	slices.Sort(fct)
	return percentile(fct, 0.50), percentile(fct, 0.99)
}

// RunCC runs the congestion scenario cfg.Scenario.
func RunCC(cfg CCConfig) (*CCResult, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	switch cfg.Scenario {
	case "incast":
		return runIncast(cfg)
	case "fairness":
		return runFairness(cfg)
	case "mixed":
		return runMixed(cfg)
	}
	return nil, fmt.Errorf("sim: unknown congestion scenario %q", cfg.Scenario)
}

// runIncast: every sender writes Size bytes to the receiver at once, for
// Rounds rounds. The ideal completion is Size at a 1/Senders share of
// the port plus a base RTT.
func runIncast(cfg CCConfig) (*CCResult, error) {
	wall := time.Now()
	s, err := newStar(cfg, cfg.Senders, cfg.Size)
	if err != nil {
		return nil, err
	}
	res := &CCResult{Scenario: "incast", CC: cfg.CC, Seed: cfg.Seed, Senders: cfg.Senders, Size: cfg.Size}
	conns := make([]*transport.Conn, cfg.Senders)
	bufs := make([][]byte, cfg.Senders)
	for i := range bufs {
		bufs[i] = make([]byte, cfg.Size)
		for k := range bufs[i] {
			bufs[i][k] = byte(i*7 + k)
		}
	}
	var (
		fct            []float64
		round, pending int
		roundAt        Time
		firstAt        Time
		carried0       float64
	)
	var startRound func(now Time)
	startRound = func(now Time) {
		if round == 0 {
			firstAt, carried0 = now, s.sent()
		}
		round++
		roundAt, pending = now, cfg.Senders
		for i, c := range conns {
			r := s.regionOf[s.senders[i].Addr]
			if err := c.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: bufs[i],
				RemoteAddr: r.addr, RKey: r.key}); err != nil {
				s.fail(err)
				return
			}
			s.senders[i].Kick()
		}
	}
	if err := s.connect(conns, startRound); err != nil {
		return nil, err
	}
	for i, h := range s.senders {
		onConn := h.OnCompletion
		h.OnCompletion = func(now Time, c transport.Completion) {
			if c.Op != transport.OpWrite {
				onConn(now, c)
				return
			}
			if c.Status != transport.StatusOK {
				res.MessagesFailed++
				s.fail(fmt.Errorf("sender %d: write: %v", i, c.Status))
				return
			}
			res.MessagesCompleted++
			fct = append(fct, float64(now-roundAt)/1e3)
			if pending--; pending == 0 && round < cfg.Rounds {
				s.n.At(now+Time(time.Microsecond), startRound)
			}
		}
	}
	total := cfg.Senders * cfg.Rounds
	s.n.Run(Time(cfg.Limit), func() bool { return res.MessagesCompleted == total || s.failed != nil })
	end := s.n.Now()
	res.MessagesLost = total - res.MessagesCompleted - res.MessagesFailed
	res.FCTP50us, res.FCTP99us = fctStats(fct)
	res.IdealFCTus = s.idealFCT(cfg.Size, s.goodputRate()/float64(cfg.Senders))
	res.P99OverIdeal = res.FCTP99us / res.IdealFCTus
	res.Utilisation = s.utilisation(carried0, firstAt)
	if end > firstAt {
		res.GoodputGbps = float64(res.MessagesCompleted*cfg.Size*8) / float64(end-firstAt)
	}
	s.finish(res, wall)
	if res.Error == "" && res.MessagesCompleted < total {
		res.Error = fmt.Sprintf("time limit %v reached with %d of %d messages complete", cfg.Limit, res.MessagesCompleted, total)
	}
	return res, nil
}

// jain is Jain's fairness index of x: 1 when all are equal, 1/len(x)
// when one has everything.
func jain(x []float64) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += v
		sq += v * v
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(x)) * sq)
}

func roundTo(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
