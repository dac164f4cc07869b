// Package perf is `metaroce perf`: perftest-style benchmarks
// (ib_write_bw, ib_write_lat, ib_read_bw, ib_send_lat) as applications of
// the client library. As in perftest, the two sides meet out of band over
// TCP (-port, default 18515): the server announces its queue pair
// numbers, address and region, the client connects its queue pairs in
// band and runs the test. Every message is checked where it lands
// (check.go): the write-bw server checks each WRITE at its own offset as
// its completion arrives, the read-bw client each READ, and the latency
// tests each message and its echo, so a run also proves the data. The
// latency tests report perftest's half round trip and, labelled rtt_*,
// the whole one; the bandwidth tests report the distribution of their
// goodput over 1 ms windows beside the average, so stalls show.
package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/cli"
)

type perfOpts struct {
	test    string
	socket  string
	connect string // server address; empty: be the server
	port    int
	size    int
	iters   int
	qps     int
	depth   int
	all     bool
	gbits   bool
	asJSON  bool
	seed    uint64
	timeout time.Duration
	poll    bool
	anyCPU  bool // -any-cpu: do not move off the engines' CPUs
}

// perfInfo is what each side tells the other out of band.
type perfInfo struct {
	Addr string   `json:"addr"` // the daemon engine's address: where queue pairs connect
	QPNs []uint32 `json:"qpns"`
	// Tokens are the queue pairs' tokens (spec §7.3), one per QPN.
	Tokens []uint64 `json:"tokens"`
	Key    uint32   `json:"key"`
	RAddr  uint64   `json:"raddr"`
	Len    int      `json:"len"`
	Seed   uint64   `json:"seed,omitempty"`
	// Done closes a run: the client's results, the server's verdict.
	Done     bool     `json:"done,omitempty"`
	Verified *bool    `json:"verified,omitempty"`
	Verdict  *verdict `json:"verdict,omitempty"`
	Err      string   `json:"err,omitempty"`
}

// Row is one size's result.
type Row struct {
	Bytes       int     `json:"bytes"`
	Iterations  int     `json:"iterations"`
	BWPeakGbps  float64 `json:"bw_peak_gbps,omitempty"`
	BWAvgGbps   float64 `json:"bw_avg_gbps,omitempty"`
	MsgRateMpps float64 `json:"msg_rate_mpps,omitempty"`
	// Goodput over the run's 1 ms windows (completed bytes per window):
	// the median and the 10th percentile, and how many windows completed
	// nothing while requests were outstanding. An average far below the
	// median window means stalls.
	Windows        int     `json:"windows,omitempty"`
	WindowP50Gbps  float64 `json:"bw_window_p50_gbps,omitempty"`
	WindowP10Gbps  float64 `json:"bw_window_p10_gbps,omitempty"`
	StalledWindows int     `json:"stalled_windows,omitempty"`
	TMinUs         float64 `json:"t_min_us,omitempty"`
	TMaxUs         float64 `json:"t_max_us,omitempty"`
	TTypicalUs     float64 `json:"t_typical_us,omitempty"`
	TAvgUs         float64 `json:"t_avg_us,omitempty"`
	TStdevUs       float64 `json:"t_stdev_us,omitempty"`
	P99Us          float64 `json:"p99_us,omitempty"`
	P999Us         float64 `json:"p999_us,omitempty"`
	// The latency tests' t_* and p99* figures are half a round trip
	// (perftest's convention); these are the whole round trip measured.
	RTTP50us float64 `json:"rtt_p50_us,omitempty"`
	RTTP99us float64 `json:"rtt_p99_us,omitempty"`
	// AckRTTP50us and AckRTTP99us (latency tests, client) are from each
	// post to that message's own completion: our engine takes the work
	// request, the peer's engine acknowledges the message, ours delivers
	// the completion. The round trip less it is about the peer
	// application's two hops (its completion, its answer's post).
	AckRTTP50us float64 `json:"ack_rtt_p50_us,omitempty"`
	AckRTTP99us float64 `json:"ack_rtt_p99_us,omitempty"`
}

// Result is a run's report (-json).
type Result struct {
	Test     string `json:"test"`
	Role     string `json:"role"`
	QPs      int    `json:"qps"`
	Rows     []Row  `json:"rows,omitempty"`
	Verified bool   `json:"verified"`
	// Verdict counts the messages checked where they landed: on the
	// server for write-bw (and reported to the client), on the client
	// for read-bw and the latency tests.
	Verdict verdict `json:"verdict"`
}

const usage = "usage: metaroce perf write-bw|write-lat|read-bw|send-lat [flags] (server), or with -connect ADDR (client); metaroce perf TEST -h for the flags"

// Run is `metaroce perf TEST [flags]`.
func Run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return cli.UsageError("%s", usage)
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintln(out, usage)
		return nil
	}
	o := perfOpts{test: args[0]}
	switch o.test {
	case "write-bw", "write-lat", "read-bw", "send-lat":
	default:
		return cli.UsageError("unknown test %q: want write-bw, write-lat, read-bw or send-lat", o.test)
	}
	fs := cli.NewFlagSet("metaroce perf "+o.test, out)
	fs.StringVar(&o.socket, "socket", client.DefaultSocket, "metaroced's control socket")
	fs.StringVar(&o.connect, "connect", "", "the server's address for the out-of-band exchange (client); empty: be the server")
	fs.IntVar(&o.port, "port", 18515, "TCP port of the out-of-band exchange (perftest's)")
	cli.IntSizeVar(fs, &o.size, "s", 64<<10, "bytes per message (65536, 64KiB)")
	fs.IntVar(&o.iters, "n", 1000, "iterations (per queue pair)")
	fs.IntVar(&o.qps, "q", 1, "queue pairs")
	fs.IntVar(&o.depth, "t", 128, "outstanding requests per queue pair (bandwidth tests)")
	fs.BoolVar(&o.all, "a", false, "all sizes from 2 bytes to 8 MiB, doubling")
	fs.BoolVar(&o.gbits, "report-gbits", false, "bandwidth in Gb/s (default MB/s, as perftest; the JSON is always Gb/s)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the data pattern")
	cli.DurationVar(fs, &o.timeout, "timeout", 60*time.Second, "give up after this long")
	fs.BoolVar(&o.anyCPU, "any-cpu", false, "stay on the daemon's engine CPUs too (by default the process moves off them when it can: client.AvoidEngineCPUs)")
	fs.BoolVar(&o.poll, "poll", false, "busy-poll completions, never sleep (perftest's default; needs a core per process)")
	if err := cli.Parse(fs, args[1:]); err != nil {
		return err
	}
	if err := cli.Check(cli.Int("s", o.size, 1, 1<<30), cli.Int("n", o.iters, 1, 1<<30), cli.Int("q", o.qps, 1, 64),
		cli.Int("t", o.depth, 1, 1<<15), cli.Int("port", o.port, 1, 65535)); err != nil {
		return err
	}
	if o.test == "write-lat" || o.test == "send-lat" {
		o.qps = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var res *Result
	var err error
	if o.connect == "" {
		res, err = perfServer(ctx, o)
	} else {
		res, err = perfClient(ctx, o)
	}
	if res != nil {
		if o.asJSON {
			json.NewEncoder(out).Encode(res)
		} else {
			printPerf(out, o, res)
		}
	}
	return err
}

func (o perfOpts) sizes() []int {
	if !o.all {
		return []int{o.size}
	}
	var s []int
	for n := 2; n <= 8<<20; n *= 2 {
		s = append(s, n)
	}
	return s
}

// maxSize is the largest message of the run: the slots' stride.
func (o perfOpts) maxSize() int { return slices.Max(o.sizes()) }

// oob is the out-of-band channel: JSON lines over TCP.
type oob struct {
	c   net.Conn
	r   *bufio.Reader
	enc *json.Encoder
}

func newOOB(c net.Conn) *oob { return &oob{c: c, r: bufio.NewReader(c), enc: json.NewEncoder(c)} }

func (o *oob) send(m perfInfo) error { return o.enc.Encode(m) }

func (o *oob) recv(ctx context.Context) (perfInfo, error) {
	var m perfInfo
	if d, ok := ctx.Deadline(); ok {
		o.c.SetReadDeadline(d)
	}
	line, err := o.r.ReadBytes('\n')
	if err != nil {
		return m, fmt.Errorf("perf: out-of-band: %w", err)
	}
	return m, json.Unmarshal(line, &m)
}

// setup is one side's session, memory and queue pairs.
type setup struct {
	c   *client.Client
	mem *client.Memory
	mr  *client.MR
	qps []*client.QP
	g   geometry
	per int // bytes of the region per queue pair: slots x stride
	// expect is what the server's slots hold (read-bw's client).
	expect *patterns
}

// newSetup registers slots x stride bytes per queue pair: the writer's
// (or reader's) L slots on the client, the target's R on the server.
func newSetup(o perfOpts, slots func(geometry) int) (*setup, error) {
	c, err := client.Dial(o.socket)
	if err != nil {
		return nil, err
	}
	if !o.anyCPU {
		// Polling beside a busy-polling engine takes turns with it.
		if _, err := c.AvoidEngineCPUs(); err != nil {
			c.Close()
			return nil, err
		}
	}
	g := newGeometry(o)
	s := &setup{c: c, g: g, per: slots(g) * g.stride}
	s.mem, err = client.Alloc(s.per * o.qps)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.mr, err = c.RegisterMemory(s.mem, 0, s.per*o.qps, client.LocalWrite|client.RemoteWrite|client.RemoteRead)
	if err != nil {
		s.close()
		return nil, err
	}
	for range o.qps {
		qo := client.QPOptions{SQSlots: pow2(2 * o.depth), CQSlots: pow2(4 * o.depth)}
		if o.poll {
			qo.Spin = -1
		}
		q, err := c.CreateQP(qo)
		if err != nil {
			s.close()
			return nil, err
		}
		s.qps = append(s.qps, q)
	}
	return s, nil
}

func pow2(n int) int {
	p := 2
	for p < n {
		p *= 2
	}
	return min(p, 1<<16)
}

func (s *setup) close() {
	s.c.Close() // the daemon frees the session's queue pairs and regions
	if s.mem != nil {
		s.mem.Close()
	}
}

func (s *setup) info() perfInfo {
	m := perfInfo{Key: s.mr.Key, RAddr: s.mr.Addr, Len: s.mr.Len}
	for _, q := range s.qps {
		m.QPNs = append(m.QPNs, q.Num)
		m.Tokens = append(m.Tokens, q.Token)
		m.Addr = q.Local.String()
	}
	return m
}

// slot is bytes [k*stride, k*stride+n) of queue pair q's part of the region.
func (s *setup) slot(q, k, n int) []byte {
	off := q*s.per + k*s.g.stride
	return s.mr.Bytes()[off : off+n]
}

// slotOff is that slot's offset in the region.
func (s *setup) slotOff(q, k int) int { return q*s.per + k*s.g.stride }

func serverSlots(g geometry) int { return g.remote }
func clientSlots(g geometry) int { return g.local }

func perfServer(ctx context.Context, o perfOpts) (*Result, error) {
	s, err := newSetup(o, serverSlots)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if o.test == "read-bw" {
		for q := range o.qps {
			for k := range s.g.remote {
				pattern(s.slot(q, k, s.g.stride), o.seed, q, k)
			}
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", fmt.Sprintf(":%d", o.port))
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	context.AfterFunc(ctx, func() { ln.Close() })
	nc, err := ln.Accept()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ch := newOOB(nc)
	peer, err := ch.recv(ctx)
	if err != nil {
		return nil, err
	}
	info := s.info()
	info.Seed = o.seed
	if err := ch.send(info); err != nil {
		return nil, err
	}
	for _, q := range s.qps {
		if _, err := q.Accept(ctx); err != nil {
			return nil, err
		}
	}
	res := &Result{Test: o.test, Role: "server", QPs: o.qps}
	var checked chan verdictOrErr
	stopCheck := func() {}
	switch o.test {
	case "write-lat", "send-lat":
		v, err := pong(ctx, o, s, peer)
		res.Verdict = v
		if err != nil {
			return res, err
		}
	case "write-bw":
		// Check each WRITE where it lands while the client runs.
		checked = make(chan verdictOrErr, 1)
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		stopCheck = stop
		go func() { v, err := landed(cctx, o, s, peer); checked <- verdictOrErr{v, err} }()
	}
	done, err := ch.recv(ctx)
	if err != nil {
		return res, err
	}
	if done.Err != "" {
		return res, fmt.Errorf("perf: client: %s", done.Err)
	}
	switch o.test {
	case "write-bw":
		// The client is done once its WRITEs are acknowledged; their
		// completions here may trail by a moment. Give them a bound.
		var r verdictOrErr
		select {
		case r = <-checked:
		case <-time.After(5 * time.Second):
			stopCheck()
			r = <-checked
		}
		res.Verdict = r.v
		if r.err != nil {
			return res, r.err
		}
		res.Verified = res.Verdict.ok()
	case "read-bw":
		res.Verified = true // the client checks each READ
	default:
		res.Verified = res.Verdict.ok()
	}
	ch.send(perfInfo{Done: true, Verified: &res.Verified, Verdict: &res.Verdict})
	return res, nil
}

type verdictOrErr struct {
	v   verdict
	err error
}

func perfClient(ctx context.Context, o perfOpts) (*Result, error) {
	s, err := newSetup(o, clientSlots)
	if err != nil {
		return nil, err
	}
	defer s.close()
	for q := range o.qps {
		for k := range s.g.local {
			pattern(s.slot(q, k, s.g.stride), o.seed, q, k)
		}
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(o.connect, fmt.Sprint(o.port)))
	for err != nil && ctx.Err() == nil { // the server may not listen yet
		time.Sleep(20 * time.Millisecond)
		nc, err = d.DialContext(ctx, "tcp", net.JoinHostPort(o.connect, fmt.Sprint(o.port)))
	}
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ch := newOOB(nc)
	info := s.info()
	info.Seed = o.seed
	if err := ch.send(info); err != nil {
		return nil, err
	}
	peer, err := ch.recv(ctx)
	if err != nil {
		return nil, err
	}
	if need := s.g.remote * s.g.stride * o.qps; len(peer.QPNs) != o.qps || len(peer.Tokens) != o.qps || peer.Len < need {
		return nil, fmt.Errorf("perf: server has %d queue pairs and %d bytes; this run needs %d and %d (same -q, -s, -n, -t, -a on both sides)",
			len(peer.QPNs), peer.Len, o.qps, need)
	}
	addr, err := netip.ParseAddr(peer.Addr)
	if err != nil {
		return nil, err
	}
	if o.test == "read-bw" {
		s.expect = newPatterns(peer.Seed, o.qps, s.g.remote, s.g.stride)
	}
	for i, q := range s.qps {
		if err := q.Connect(ctx, addr, peer.QPNs[i], peer.Tokens[i]); err != nil {
			return nil, err
		}
	}
	res := &Result{Test: o.test, Role: "client", QPs: o.qps}
	var runErr error
	for _, size := range o.sizes() {
		var row Row
		var v verdict
		switch o.test {
		case "write-bw", "read-bw":
			row, v, runErr = bandwidth(ctx, o, s, peer, size)
		case "write-lat", "send-lat":
			row, v, runErr = ping(ctx, o, s, peer, size)
		}
		res.Verdict.add(v)
		if runErr != nil {
			break
		}
		res.Rows = append(res.Rows, row)
	}
	res.Verified = runErr == nil && (o.test == "write-bw" || res.Verdict.ok())
	msg := perfInfo{Done: true, Seed: o.seed}
	if runErr != nil {
		msg.Err = runErr.Error()
	}
	if err := ch.send(msg); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil && o.test == "write-bw" {
		v, err := ch.recv(ctx)
		if err != nil {
			return res, err
		}
		res.Verified = v.Verified != nil && *v.Verified
		if v.Verdict != nil {
			res.Verdict = *v.Verdict
		}
	}
	if runErr == nil && !res.Verified {
		runErr = fmt.Errorf("perf: data not verified: %d messages verified, %d corrupt, %d missing",
			res.Verdict.Verified, res.Verdict.Corrupt, res.Verdict.Missing)
	}
	return res, runErr
}

func latRow(size int, lat []float64) Row {
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum, sq float64
	for _, v := range s {
		sum += v
	}
	avg := sum / float64(len(s))
	for _, v := range s {
		sq += (v - avg) * (v - avg)
	}
	q := func(p float64) float64 { return round3(s[min(len(s)-1, int(p*float64(len(s))))]) }
	return Row{Bytes: size, Iterations: len(s), TMinUs: round3(s[0]), TMaxUs: round3(s[len(s)-1]),
		TTypicalUs: q(0.5), TAvgUs: round3(avg), TStdevUs: round3(math.Sqrt(sq / float64(len(s)))),
		P99Us: q(0.99), P999Us: q(0.999), RTTP50us: round3(2 * q(0.5)), RTTP99us: round3(2 * q(0.99))}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func printPerf(w io.Writer, o perfOpts, r *Result) {
	fmt.Fprintf(w, "metaroce perf %s (%s), %d queue pair(s), data verified: %v (%d messages checked where they landed, %d corrupt, %d missing)\n",
		r.Test, r.Role, r.QPs, r.Verified, r.Verdict.Verified, r.Verdict.Corrupt, r.Verdict.Missing)
	if len(r.Rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if o.test == "write-bw" || o.test == "read-bw" {
		unit, f := "MB/sec", func(g float64) float64 { return g * 1e9 / 8 / 1e6 }
		if o.gbits {
			unit, f = "Gb/sec", func(g float64) float64 { return g }
		}
		fmt.Fprintf(tw, "#bytes\t#iterations\tBW peak[%s]\tBW average[%s]\tBW 1ms p50[%s]\tBW 1ms p10[%s]\tstalled 1ms\tMsgRate[Mpps]\t\n", unit, unit, unit, unit)
		for _, x := range r.Rows {
			fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%.6f\t\n", x.Bytes, x.Iterations, f(x.BWPeakGbps), f(x.BWAvgGbps),
				f(x.WindowP50Gbps), f(x.WindowP10Gbps), x.StalledWindows, x.MsgRateMpps)
		}
	} else {
		fmt.Fprintf(tw, "#bytes\t#iterations\tt_min[usec]\tt_max[usec]\tt_typical[usec]\tt_avg[usec]\tt_stdev[usec]\t99%% percentile[usec]\t99.9%% percentile[usec]\tRTT p50[usec]\t\n")
		for _, x := range r.Rows {
			fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", x.Bytes, x.Iterations, x.TMinUs, x.TMaxUs,
				x.TTypicalUs, x.TAvgUs, x.TStdevUs, x.P99Us, x.P999Us, x.RTTP50us)
		}
	}
	tw.Flush()
}
