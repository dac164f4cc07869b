package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/ecnmark"
	"github.com/metaroce/metaroce/internal/testnet"
)

// The incast demo: N sender hosts write at once into one receiver behind
// a rate-limited, ECN-marking switch port (testnet.ECNPort: tbf plus the
// ecnmark program), as sim/incast.go's scenario does on simulated links.
// Each contender (metaroce's controllers on the daemon, Linux TCP) runs
// the same rounds on the same port; the JSON has one object per contender
// under its name, with the simulator's incast field names. docs/demo.md
// says what each figure is.

// incastContenders are the names -cc accepts, in the order they run.
var incastContenders = []string{"metaroce", "none", "dcqcn", "receiver-hint", "tcp_cubic", "tcp_bbr"}

// defaultIncastCC is what runs without -cc: every contender of issue 17
// (receiver-hint is left out: it is metaroce without its delay target).
const defaultIncastCC = "metaroce,none,dcqcn,tcp_cubic,tcp_bbr"

// IncastResult is the JSON of `metaroce demo -topology incast`.
type IncastResult struct {
	Topology    string  `json:"topology"`
	Senders     int     `json:"senders"`
	Size        int     `json:"size"`
	Rounds      int     `json:"rounds"`
	PortRateBps uint64  `json:"port_rate_bps"`
	ECNBytes    int     `json:"ecn_bytes"`
	BufferBytes int     `json:"buffer_bytes"`
	Backend     string  `json:"backend"`
	Offloads    bool    `json:"offloads"`
	TCPECN      bool    `json:"tcp_ecn"`
	BaseRTTus   float64 `json:"base_rtt_us"`
	// IdealFCTus is every sender's whole burst through the port at its
	// rate plus a base RTT: senders x size / rate + base_rtt_us.
	IdealFCTus float64 `json:"ideal_fct_us"`
	// OK is the verdict: every contender ran without error with every
	// message verified; the command exits non-zero without it.
	OK bool `json:"ok"`

	Metaroce     *IncastContender `json:"metaroce,omitempty"`
	None         *IncastContender `json:"none,omitempty"`
	DCQCN        *IncastContender `json:"dcqcn,omitempty"`
	ReceiverHint *IncastContender `json:"receiver-hint,omitempty"`
	TCPCubic     *IncastContender `json:"tcp_cubic,omitempty"`
	TCPBBR       *IncastContender `json:"tcp_bbr,omitempty"`

	PNG    string   `json:"png,omitempty"`
	Errors []string `json:"errors,omitempty"`
	WallS  float64  `json:"wall_s"`
}

// contender returns the field of the named contender.
func (r *IncastResult) contender(name string) **IncastContender {
	switch name {
	case "metaroce":
		return &r.Metaroce
	case "none":
		return &r.None
	case "dcqcn":
		return &r.DCQCN
	case "receiver-hint":
		return &r.ReceiverHint
	case "tcp_cubic":
		return &r.TCPCubic
	case "tcp_bbr":
		return &r.TCPBBR
	}
	return nil
}

// IncastContender is one contender's rounds, in the simulator's incast
// field names where it has them (sim/incast.go).
type IncastContender struct {
	CC string `json:"cc"`
	// OK: every round ran, every message completed and was verified.
	OK                bool   `json:"ok"`
	Error             string `json:"error,omitempty"`
	Messages          int    `json:"messages"`
	MessagesCompleted int    `json:"messages_completed"`
	MessagesFailed    int    `json:"messages_failed"`
	DataVerified      bool   `json:"data_verified"`

	FCTP50us     float64 `json:"fct_p50_us"`
	FCTP99us     float64 `json:"fct_p99_us"`
	FCTMaxus     float64 `json:"fct_max_us"`
	IdealFCTus   float64 `json:"ideal_fct_us"`
	P99OverIdeal float64 `json:"p99_over_ideal"`

	// Timeouts: metaroce's RTO expiries (every daemon), TCP's
	// TCPTimeouts (the senders' namespaces).
	Timeouts          uint64 `json:"timeouts"`
	PacketsSent       uint64 `json:"packets_sent,omitempty"`
	PacketsRetransmit uint64 `json:"packets_retransmitted"`
	// The port: drops (the marker's and tbf's, QdiscDrops of them
	// tbf's), the marker's CE marks, the backlog arriving packets found in
	// the marker's virtual queue (max exact, quantiles a histogram
	// bucket's upper edge), and tbf's real backlog sampled every
	// millisecond.
	QueueDrops    uint64 `json:"queue_drops"`
	QdiscDrops    uint64 `json:"qdisc_drops"`
	Marked        uint64 `json:"ecn_marked"`
	QueueMaxBytes int    `json:"queue_max_bytes"`
	QueueP50Bytes int    `json:"queue_p50_bytes"`
	QueueP99Bytes int    `json:"queue_p99_bytes"`
	QdiscMaxBytes int    `json:"qdisc_backlog_max_bytes"`
	QdiscP99Bytes int    `json:"qdisc_backlog_p99_bytes"`
	QdiscSamples  int    `json:"qdisc_samples"`
	// CEReceived is CE-marked data the receiver saw (metaroce: its
	// transport's RxCE); CEEchoed the marks the senders learnt of
	// (metaroce: CEEchoed from acks; TCP: TcpExt TCPDeliveredCE).
	CEReceived uint64 `json:"ce_received"`
	CEEchoed   uint64 `json:"ce_echoed"`

	// GoodputGbps is the rounds' bytes over the rounds' durations (each
	// round's last completion); Utilisation that over the port's rate.
	GoodputGbps  float64   `json:"goodput_gbps"`
	Utilisation  float64   `json:"utilisation"`
	JainFairness float64   `json:"jain_fairness"`
	FlowGbps     []float64 `json:"flow_gbps"`
	// Round 1 alone, from fresh connections: its slowest completion, and
	// the port's marks, drops and queue peak by its end.
	ColdFCTMaxus      float64 `json:"cold_fct_max_us"`
	ColdMarked        uint64  `json:"cold_ecn_marked"`
	ColdDrops         uint64  `json:"cold_queue_drops"`
	ColdQueueMaxBytes int     `json:"cold_queue_max_bytes"`
	WallS             float64 `json:"wall_s"`

	fcts []time.Duration // every completion, for the plot
}

type incastOpts struct {
	senders    int
	size       int
	rounds     int
	rate       uint64
	ecnBytes   int
	buffer     int
	backend    string
	cc         []string
	tcpECN     bool
	offloads   bool
	out        string
	roundLimit time.Duration
}

func runIncastDemo(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce demo -topology incast", out)
	fs.String("topology", "incast", topologyUsage)
	o := incastOpts{}
	fs.IntVar(&o.senders, "senders", 4, "sender hosts")
	cli.IntSizeVar(fs, &o.size, "size", 256<<10, "bytes each sender writes per round")
	fs.IntVar(&o.rounds, "rounds", 10, "incast rounds per contender, the first from fresh connections")
	cli.RateVar(fs, &o.rate, "rate", 200_000_000, "bit rate of the receiver's switch port (tc tbf and the marker), 1Mbit to 100Gbit")
	cli.IntSizeVar(fs, &o.ecnBytes, "ecn-bytes", 32<<10, "the port marks CE on ECN-capable packets finding more than this queued")
	cli.IntSizeVar(fs, &o.buffer, "buffer", 256<<10, "the port's buffer: packets that would overflow it are dropped")
	fs.StringVar(&o.backend, "backend", "afxdp", "metaroced backend: afxdp or udp")
	cc := fs.String("cc", defaultIncastCC, "contenders, comma-separated: "+strings.Join(incastContenders, ", ")+", or all")
	fs.BoolVar(&o.tcpECN, "tcp-ecn", true, "net.ipv4.tcp_ecn=1 on every host, so TCP's packets are ECN-capable")
	fs.BoolVar(&o.offloads, "offloads", false, "leave veth TSO/GSO/GRO on (the port then sees 64 KB TCP super-packets)")
	cli.DurationVar(fs, &o.roundLimit, "round-limit", 30*time.Second, "a round not finished by then fails")
	fs.StringVar(&o.out, "out", ".", "directory for the PNG (without -json)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.Check(cli.Int("senders", o.senders, 1, 64), cli.Int("size", o.size, 8, 64<<20), cli.Int("rounds", o.rounds, 1, 10000),
		cli.Int("ecn-bytes", o.ecnBytes, 0, 1<<30), cli.Int("buffer", o.buffer, 4096, 1<<30)); err != nil {
		return err
	}
	if err := cli.CheckRate("rate", o.rate, 1e6, 100e9); err != nil {
		return err
	}
	if o.ecnBytes >= o.buffer {
		return cli.UsageError("-ecn-bytes %d: want less than -buffer %d", o.ecnBytes, o.buffer)
	}
	if o.roundLimit <= 0 {
		return cli.UsageError("-round-limit %v: want a positive duration", o.roundLimit)
	}
	if o.backend != "afxdp" && o.backend != "udp" {
		return cli.UsageError("-backend %q: want afxdp or udp", o.backend)
	}
	names := strings.Split(*cc, ",")
	if *cc == "all" {
		names = incastContenders
	}
	for _, n := range names {
		if !slices.Contains(incastContenders, n) {
			return cli.UsageError("-cc %q: want some of %s, or all", n, strings.Join(incastContenders, ", "))
		}
		if slices.Contains(o.cc, n) {
			return cli.UsageError("-cc: %q twice", n)
		}
		o.cc = append(o.cc, n)
	}
	if os.Geteuid() != 0 {
		return errors.New("demo: needs root (network namespaces, XDP, AF_XDP, tc BPF): run with sudo")
	}
	start := time.Now()
	res, err := incastDemo(o)
	if res != nil {
		if !*asJSON {
			png, perr := plotIncast(res, o.out)
			if perr != nil {
				res.Errors = append(res.Errors, "plot: "+perr.Error())
				res.OK = false
				if err == nil {
					err = fmt.Errorf("demo: plot: %w", perr)
				}
			}
			res.PNG = png
		}
		res.WallS = time.Since(start).Seconds()
		if *asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			enc.Encode(res)
		} else {
			printIncast(out, res, o.cc)
		}
	}
	return err
}

func incastDemo(o incastOpts) (*IncastResult, error) {
	testnet.Sweep()
	// Host 0 is the receiver, hosts 1..N the senders.
	star, err := testnet.OpenStar(o.senders+1, testnet.Config{Link: testnet.LinkConfig{NoOffloads: !o.offloads}})
	if err != nil {
		return nil, err
	}
	defer star.Close()
	port, err := star.Switch.SetECNPort(0, testnet.ECNPortConfig{RateBps: o.rate, ECNBytes: o.ecnBytes, LimitBytes: o.buffer})
	if err != nil {
		return nil, err
	}
	defer port.Close()
	res := &IncastResult{Topology: "incast", Senders: o.senders, Size: o.size, Rounds: o.rounds, PortRateBps: o.rate,
		ECNBytes: o.ecnBytes, BufferBytes: o.buffer, Backend: o.backend, Offloads: o.offloads, TCPECN: o.tcpECN}
	recv, senders := star.Hosts[0], star.Hosts[1:]
	if res.BaseRTTus, err = baseRTT(senders[0], recv); err != nil {
		return res, fmt.Errorf("demo: base RTT: %w", err)
	}
	res.IdealFCTus = float64(o.senders*o.size)*8/float64(o.rate)*1e6 + res.BaseRTTus
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "metaroce-incast-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if o.tcpECN {
		for _, h := range star.Hosts {
			if err := h.Sysctl(map[string]string{"net.ipv4.tcp_ecn": "1"}); err != nil {
				return res, fmt.Errorf("demo: tcp_ecn in %s: %w", h.Name, err)
			}
		}
	}
	for i, name := range o.cc {
		start := time.Now()
		c := &IncastContender{CC: name, Messages: o.rounds * o.senders, IdealFCTus: res.IdealFCTus}
		var err error
		if cc, ok := strings.CutPrefix(name, "tcp_"); ok {
			err = runIncastTCP(c, o, port, recv, senders, cc, uint16(18700+i))
		} else {
			err = runIncastMetaroce(c, o, port, self, dir, recv, senders, name)
		}
		if err != nil {
			c.Error = err.Error()
			res.Errors = append(res.Errors, name+": "+err.Error())
		}
		c.OK = err == nil && c.DataVerified && c.MessagesCompleted == c.Messages
		c.WallS = time.Since(start).Seconds()
		*res.contender(name) = c
	}
	res.OK = len(res.Errors) == 0
	for _, n := range o.cc {
		res.OK = res.OK && (*res.contender(n)).OK
	}
	if !res.OK {
		return res, fmt.Errorf("demo: incast: not every contender passed: %s", strings.Join(res.Errors, "; "))
	}
	return res, nil
}

// baseRTT is the median of 21 ICMP echoes from a to b through the switch,
// timed around the call (the namespace switch included): the network's
// round trip without a transport's host delay.
func baseRTT(a, b *testnet.Host) (float64, error) {
	var rtts []float64
	for range 21 {
		t := time.Now()
		if err := a.Ping(b.IPv4, time.Second); err != nil {
			return 0, err
		}
		rtts = append(rtts, float64(time.Since(t))/1e3)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], nil
}

// roundRunner is one contender's traffic: a round at a time.
type roundRunner func(ctx context.Context, round int) roundResult

// runRounds runs o.rounds rounds with the port idle between them,
// sampling the qdisc, and fills in c's completion, port and fairness
// figures. There is no warm-up round: the connections are set up before
// round 1, so round 1 is an incast from fresh connections, as the
// simulator's is, and the later rounds find each controller in the state
// the previous round left it in; round 1's slowest completion, marks and
// queue peak are reported apart (cold_*). before and after bracket the
// rounds (the contenders' own counters).
func runRounds(c *IncastContender, o incastOpts, port *testnet.ECNPort, run roundRunner, before, after func() error) error {
	idle := time.Duration(float64(o.buffer)*8/float64(o.rate)*float64(time.Second)) + 5*time.Millisecond
	if err := port.Reset(); err != nil {
		return err
	}
	if err := before(); err != nil {
		return err
	}
	q0, err := port.Qdisc()
	if err != nil {
		return err
	}
	if err := port.StartSampling(time.Millisecond); err != nil {
		return err
	}
	flowBytes := make([]float64, o.senders)
	flowTime := make([]float64, o.senders)
	var roundTime float64
	var firstErr error
	verified := 0
	for r := 1; r <= o.rounds; r++ {
		ctx, cancel := context.WithTimeout(context.Background(), o.roundLimit)
		rr := run(ctx, r)
		cancel()
		verified += rr.Verified
		c.MessagesFailed += rr.Failed
		var longest time.Duration
		for i, d := range rr.FCT {
			if d > 0 {
				c.MessagesCompleted++
				c.fcts = append(c.fcts, d)
				flowBytes[i] += float64(o.size)
				flowTime[i] += d.Seconds()
				longest = max(longest, d)
			}
		}
		roundTime += longest.Seconds()
		if rr.Err != nil && firstErr == nil {
			firstErr = fmt.Errorf("round %d: %w", r, rr.Err)
		}
		timedOut := rr.Err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
		if !timedOut {
			time.Sleep(idle) // the port drains before the next round
		}
		if r == 1 {
			cnt, err := port.Counters()
			if err != nil {
				firstErr = errors.Join(firstErr, err)
				break
			}
			c.ColdFCTMaxus, c.ColdMarked, c.ColdDrops, c.ColdQueueMaxBytes = float64(longest)/1e3, cnt.Marked, cnt.Dropped, int(cnt.PeakBytes)
		}
		if timedOut {
			break // a round that timed out leaves WRITEs in flight: the next would mix with them
		}
	}
	samples := port.StopSampling()
	if err := after(); err != nil && firstErr == nil {
		firstErr = err
	}
	c.DataVerified = verified == c.Messages && c.MessagesFailed == 0
	slices.Sort(c.fcts)
	c.FCTP50us, c.FCTP99us = quantileUs(c.fcts, 0.5), quantileUs(c.fcts, 0.99)
	if len(c.fcts) > 0 {
		c.FCTMaxus = float64(c.fcts[len(c.fcts)-1]) / 1e3
	}
	if c.IdealFCTus > 0 {
		c.P99OverIdeal = c.FCTP99us / c.IdealFCTus
	}
	cnt, err := port.Counters()
	if err != nil {
		return errors.Join(firstErr, err)
	}
	h, err := port.Histogram()
	if err != nil {
		return errors.Join(firstErr, err)
	}
	q1, err := port.Qdisc()
	if err != nil {
		return errors.Join(firstErr, err)
	}
	c.QdiscDrops = uint64(q1.Drops - q0.Drops)
	c.QueueDrops, c.Marked, c.QueueMaxBytes = cnt.Dropped+c.QdiscDrops, cnt.Marked, int(cnt.PeakBytes)
	c.QueueP50Bytes, c.QueueP99Bytes = histQuantile(h, 0.5, cnt.PeakBytes), histQuantile(h, 0.99, cnt.PeakBytes)
	c.QdiscMaxBytes, c.QdiscP99Bytes, c.QdiscSamples = testnet.SampleQuantile(samples, 1), testnet.SampleQuantile(samples, 0.99), len(samples)
	var total float64
	for i := range flowBytes {
		g := 0.0
		if flowTime[i] > 0 {
			g = flowBytes[i] * 8 / flowTime[i] / 1e9
		}
		c.FlowGbps = append(c.FlowGbps, g)
		total += flowBytes[i]
	}
	c.JainFairness = jain(c.FlowGbps)
	if roundTime > 0 {
		c.GoodputGbps = total * 8 / roundTime / 1e9
		c.Utilisation = c.GoodputGbps * 1e9 / float64(o.rate)
	}
	return firstErr
}

// histQuantile is a quantile of the port's histogram in bytes, never above
// the exact maximum (a bucket's upper edge can be).
func histQuantile(h ecnmark.Histogram, q float64, peak uint64) int {
	return int(math.Min(h.Quantile(q), float64(peak)))
}

// quantileUs is the nearest-rank quantile of sorted durations, in us.
func quantileUs(s []time.Duration, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return float64(s[min(max(i, 0), len(s)-1)]) / 1e3
}

// jain is Jain's fairness index of xs: (sum x)^2 / (n sum x^2).
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// runIncastMetaroce runs the rounds with metaroced on every host and the
// named controller (the daemon's congestion key).
func runIncastMetaroce(c *IncastContender, o incastOpts, port *testnet.ECNPort, self, dir string, recv *testnet.Host, senders []*testnet.Host, cc string) error {
	hosts := append([]*testnet.Host{recv}, senders...)
	// The hosts' downlink is the receiver's switch port: the daemons are
	// told its rate (line_rate_bps), as a deployment tells them its NICs',
	// so the receiver's fair-share hints (spec §8.9.3) divide 200 Mb/s,
	// not the 100 Gb/s default.
	ds, err := startDaemons(self, dir, o.backend, cc, hosts,
		fmt.Sprintf("congestion: %s\ntransport:\n  line_rate_bps: %d\n", cc, o.rate))
	if err != nil {
		return err
	}
	defer ds.stop()
	flows, err := openIncastFlows(context.Background(), ds.socks[0], ds.socks[1:], recv.IPv4, o.size)
	if err != nil {
		return err
	}
	defer flows.close()
	var s0 []transportStats
	before := func() error {
		s0, err = ds.stats()
		return err
	}
	after := func() error {
		s1, err := ds.stats()
		if err != nil {
			return err
		}
		var sum transportStats
		for i := range s1 {
			d := s1[i].sub(s0[i])
			sum = sum.add(d)
			if i == 0 {
				c.CEReceived = d.RxCE
			} else {
				c.CEEchoed += d.CEEchoed
			}
		}
		c.Timeouts, c.PacketsSent, c.PacketsRetransmit = sum.Timeouts, sum.Sent, sum.Retransmitted
		return nil
	}
	return runRounds(c, o, port, flows.round, before, after)
}

// runIncastTCP runs the rounds over Linux TCP with congestion control cc.
func runIncastTCP(c *IncastContender, o incastOpts, port *testnet.ECNPort, recv *testnet.Host, senders []*testnet.Host, cc string, tcpPort uint16) error {
	t, err := openTCPIncast(recv, senders, cc, o.size, tcpPort)
	if err != nil {
		return err
	}
	defer t.close()
	names := []string{"TCPTimeouts", "TCPDeliveredCE"}
	var ext0 []map[string]uint64
	var re0 uint64
	read := func() ([]map[string]uint64, uint64, error) {
		var ms []map[string]uint64
		for _, h := range senders {
			m, err := tcpExt(h, names...)
			if err != nil {
				return nil, 0, err
			}
			ms = append(ms, m)
		}
		re, err := t.retrans()
		return ms, re, err
	}
	before := func() error {
		ext0, re0, err = read()
		return err
	}
	after := func() error {
		ext1, re1, err := read()
		if err != nil {
			return err
		}
		for i := range ext1 {
			c.Timeouts += ext1[i]["TCPTimeouts"] - ext0[i]["TCPTimeouts"]
			c.CEEchoed += ext1[i]["TCPDeliveredCE"] - ext0[i]["TCPDeliveredCE"]
		}
		c.PacketsRetransmit = re1 - re0
		return nil
	}
	return runRounds(c, o, port, t.round, before, after)
}

func printIncast(w io.Writer, r *IncastResult, order []string) {
	fmt.Fprintf(w, "metaroce demo: incast, %d senders x %s into one receiver behind a %.0f Mb/s port (ECN above %s, buffer %s), %d rounds; verdict ok %v\n",
		r.Senders, cli.FormatSize(int64(r.Size)), float64(r.PortRateBps)/1e6, cli.FormatSize(int64(r.ECNBytes)), cli.FormatSize(int64(r.BufferBytes)), r.Rounds, r.OK)
	fmt.Fprintf(w, "ideal      %.0f us (the burst at the port's rate + base RTT %.0f us)\n", r.IdealFCTus, r.BaseRTTus)
	fmt.Fprintf(w, "%-14s %9s %9s %8s %8s %7s %8s %15s %13s %7s %6s %s\n", "contender", "p50 ms", "p99 ms", "p99/ideal", "timeouts", "retx", "drops", "queue max/p99 KB", "CE marks", "jain", "util", "verified")
	for _, n := range order {
		c := *r.contender(n)
		if c == nil {
			continue
		}
		fmt.Fprintf(w, "%-14s %9.2f %9.2f %8.2f %8d %7d %8d %7.0f/%-7.0f %13d %7.3f %5.0f%% %v\n", n, c.FCTP50us/1e3, c.FCTP99us/1e3, c.P99OverIdeal,
			c.Timeouts, c.PacketsRetransmit, c.QueueDrops, float64(c.QueueMaxBytes)/1024, float64(c.QueueP99Bytes)/1024, c.Marked, c.JainFairness, 100*c.Utilisation, c.DataVerified)
	}
	if r.PNG != "" {
		fmt.Fprintf(w, "plot       %s\n", r.PNG)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error      %s\n", e)
	}
}

// incastPNG is the plot's file name in -out.
func incastPNG(dir string) (string, error) { return filepath.Abs(filepath.Join(dir, "incast-fct.png")) }
