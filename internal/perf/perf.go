// Package perf is `metaroce perf`: perftest-style benchmarks
// (ib_write_bw, ib_write_lat, ib_read_bw, ib_send_lat) as applications of
// the client library. As in perftest, the two sides meet out of band over
// TCP (-port, default 18515): the server announces its queue pair
// numbers, address and region, the client connects its queue pairs in
// band and runs the test, and the server checks at the end that its
// memory holds exactly what the client wrote (bandwidth tests), so a run
// also proves the data arrived. The latency tests report perftest's half
// round trip and, labelled rtt_*, the whole one.
package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
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
}

// perfInfo is what each side tells the other out of band.
type perfInfo struct {
	Addr  string   `json:"addr"` // the daemon engine's address: where queue pairs connect
	QPNs  []uint32 `json:"qpns"`
	Key   uint32   `json:"key"`
	RAddr uint64   `json:"raddr"`
	Len   int      `json:"len"`
	Seed  uint64   `json:"seed,omitempty"`
	// Done closes a run: the client's results, the server's verdict.
	Done     bool   `json:"done,omitempty"`
	Verified *bool  `json:"verified,omitempty"`
	Err      string `json:"err,omitempty"`
}

// Row is one size's result.
type Row struct {
	Bytes       int     `json:"bytes"`
	Iterations  int     `json:"iterations"`
	BWPeakGbps  float64 `json:"bw_peak_gbps,omitempty"`
	BWAvgGbps   float64 `json:"bw_avg_gbps,omitempty"`
	MsgRateMpps float64 `json:"msg_rate_mpps,omitempty"`
	TMinUs      float64 `json:"t_min_us,omitempty"`
	TMaxUs      float64 `json:"t_max_us,omitempty"`
	TTypicalUs  float64 `json:"t_typical_us,omitempty"`
	TAvgUs      float64 `json:"t_avg_us,omitempty"`
	TStdevUs    float64 `json:"t_stdev_us,omitempty"`
	P99Us       float64 `json:"p99_us,omitempty"`
	P999Us      float64 `json:"p999_us,omitempty"`
	// The latency tests' t_* and p99* figures are half a round trip
	// (perftest's convention); these are the whole round trip measured.
	RTTP50us float64 `json:"rtt_p50_us,omitempty"`
	RTTP99us float64 `json:"rtt_p99_us,omitempty"`
}

// Result is a run's report (-json).
type Result struct {
	Test     string `json:"test"`
	Role     string `json:"role"`
	QPs      int    `json:"qps"`
	Rows     []Row  `json:"rows,omitempty"`
	Verified bool   `json:"verified"`
}

func Run(args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" {
		return errors.New("perf: usage: metaroce perf write-bw|write-lat|read-bw|send-lat [flags] (server), or with -connect ADDR (client)")
	}
	o := perfOpts{test: args[0]}
	switch o.test {
	case "write-bw", "write-lat", "read-bw", "send-lat":
	default:
		return fmt.Errorf("perf: unknown test %q: want write-bw, write-lat, read-bw or send-lat", o.test)
	}
	fs := cli.NewFlagSet("metaroce perf "+o.test, out)
	fs.StringVar(&o.socket, "socket", client.DefaultSocket, "metaroced's control socket")
	fs.StringVar(&o.connect, "connect", "", "the server's address for the out-of-band exchange (client); empty: be the server")
	fs.IntVar(&o.port, "port", 18515, "TCP port of the out-of-band exchange (perftest's)")
	fs.IntVar(&o.size, "s", 65536, "bytes per message")
	fs.IntVar(&o.iters, "n", 1000, "iterations (per queue pair)")
	fs.IntVar(&o.qps, "q", 1, "queue pairs")
	fs.IntVar(&o.depth, "t", 128, "outstanding requests per queue pair (bandwidth tests)")
	fs.BoolVar(&o.all, "a", false, "all sizes from 2 bytes to 8 MiB, doubling")
	fs.BoolVar(&o.gbits, "report-gbits", false, "bandwidth in Gb/s (default MB/s, as perftest)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the data pattern")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up after this long")
	fs.BoolVar(&o.poll, "poll", false, "busy-poll completions, never sleep (perftest's default; needs a core per process)")
	if err := cli.Parse(fs, args[1:]); err != nil {
		return err
	}
	if o.size <= 0 || o.iters <= 0 || o.qps <= 0 || o.qps > 64 || o.depth <= 0 {
		return errors.New("perf: -s, -n, -t positive, -q in 1..64")
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

// maxSize is the largest message of the run: the regions' size per QP.
func (o perfOpts) maxSize() int { return slices.Max(o.sizes()) }

// pattern fills b with the run's bytes for queue pair i.
func pattern(b []byte, seed uint64, i int) {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	for k := 0; k+8 <= len(b); k += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[k+j] = byte(v >> (8 * j))
		}
	}
	for k := len(b) &^ 7; k < len(b); k++ {
		b[k] = byte(r.Uint32())
	}
}

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
	per int // bytes of the region per queue pair
}

func newSetup(o perfOpts) (*setup, error) {
	c, err := client.Dial(o.socket)
	if err != nil {
		return nil, err
	}
	s := &setup{c: c, per: o.maxSize()}
	if o.test == "write-lat" || o.test == "send-lat" {
		s.per *= 2 // the second half receives the answers
	}
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
		m.Addr = q.Local.String()
	}
	return m
}

func perfServer(ctx context.Context, o perfOpts) (*Result, error) {
	s, err := newSetup(o)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if o.test == "read-bw" {
		for i := range o.qps {
			pattern(s.mr.Bytes()[i*s.per:(i+1)*s.per], o.seed, i)
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
	switch o.test {
	case "write-lat", "send-lat":
		if err := pong(ctx, o, s, peer); err != nil {
			return res, err
		}
	}
	done, err := ch.recv(ctx)
	if err != nil {
		return res, err
	}
	if done.Err != "" {
		return res, fmt.Errorf("perf: client: %s", done.Err)
	}
	if o.test == "write-bw" {
		// The last write of each queue pair's largest size covers its
		// whole slice with the client's pattern: every byte is checked.
		res.Verified = true
		want := make([]byte, s.per)
		for i := range o.qps {
			pattern(want, done.Seed, i)
			if string(want) != string(s.mr.Bytes()[i*s.per:(i+1)*s.per]) {
				res.Verified = false
			}
		}
	} else {
		res.Verified = true // read-bw: the client checks; latency tests check each message
	}
	ch.send(perfInfo{Done: true, Verified: &res.Verified})
	return res, nil
}

func perfClient(ctx context.Context, o perfOpts) (*Result, error) {
	s, err := newSetup(o)
	if err != nil {
		return nil, err
	}
	defer s.close()
	for i := range o.qps {
		pattern(s.mr.Bytes()[i*s.per:(i+1)*s.per], o.seed, i)
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
	if err := ch.send(s.info()); err != nil {
		return nil, err
	}
	peer, err := ch.recv(ctx)
	if err != nil {
		return nil, err
	}
	if len(peer.QPNs) != o.qps || peer.Len < s.per*o.qps {
		return nil, fmt.Errorf("perf: server has %d queue pairs and %d bytes; this run needs %d and %d (same -q, -s, -a)",
			len(peer.QPNs), peer.Len, o.qps, s.per*o.qps)
	}
	addr, err := netip.ParseAddr(peer.Addr)
	if err != nil {
		return nil, err
	}
	for i, q := range s.qps {
		if err := q.Connect(ctx, addr, peer.QPNs[i]); err != nil {
			return nil, err
		}
	}
	res := &Result{Test: o.test, Role: "client", QPs: o.qps}
	var runErr error
	for _, size := range o.sizes() {
		var row Row
		switch o.test {
		case "write-bw", "read-bw":
			row, runErr = bandwidth(ctx, o, s, peer, size)
		case "write-lat", "send-lat":
			row, runErr = ping(ctx, o, s, peer, size)
		}
		if runErr != nil {
			break
		}
		res.Rows = append(res.Rows, row)
	}
	if runErr == nil && o.test == "write-bw" && o.maxSize() != o.sizes()[len(o.sizes())-1] {
		runErr = errors.New("perf: internal: sizes out of order")
	}
	res.Verified = runErr == nil
	if runErr == nil && o.test == "read-bw" {
		want := make([]byte, s.per)
		for i := range o.qps {
			pattern(want, peer.Seed, i) // what the server filled its memory with
			if string(want) != string(s.mr.Bytes()[i*s.per:(i+1)*s.per]) {
				res.Verified = false
			}
		}
	}
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
	}
	if runErr == nil && !res.Verified {
		runErr = errors.New("perf: data not verified")
	}
	return res, runErr
}

// bandwidth keeps o.depth requests outstanding on each queue pair until
// o.iters have completed on each, and reports the rate.
func bandwidth(ctx context.Context, o perfOpts, s *setup, peer perfInfo, size int) (Row, error) {
	op := client.OpWrite
	if o.test == "read-bw" {
		op = client.OpRead
	}
	posted := make([]int, len(s.qps))
	done := make([]int, len(s.qps))
	cq := make([]client.Completion, 64)
	wrs := make([]client.WR, 0, 64)
	start := time.Now()
	total, want := 0, o.iters*len(s.qps)
	peak := 0.0
	lastT, lastN := start, 0
	for total < want {
		progress := false
		for i, q := range s.qps {
			wrs = wrs[:0]
			for posted[i]-done[i] < o.depth && posted[i] < o.iters && len(wrs) < cap(wrs) {
				off := i * s.per
				wrs = append(wrs, client.WR{Op: op, WRID: uint64(posted[i]), Local: s.mr, LocalOff: off,
					Length: size, RemoteAddr: peer.RAddr + uint64(off), RemoteKey: peer.Key})
				posted[i]++
			}
			if len(wrs) > 0 {
				n, err := q.Post(wrs...)
				if err != nil && !errors.Is(err, client.ErrSQFull) {
					return Row{}, err
				}
				posted[i] -= len(wrs) - n
			}
			n, err := q.PollCQ(cq)
			if err != nil {
				return Row{}, err
			}
			for _, c := range cq[:n] {
				if err := c.Err(); err != nil {
					return Row{}, fmt.Errorf("perf: %s %d: %w", c.Op, c.WRID, err)
				}
			}
			done[i] += n
			total += n
			progress = progress || n > 0
		}
		if !progress {
			// Every window is full: block (after a short spin) on the
			// queue pair with the most outstanding, rather than spin and
			// take the CPU the daemon's engine needs.
			k := 0
			for i := range s.qps {
				if posted[i]-done[i] > posted[k]-done[k] {
					k = i
				}
			}
			if posted[k] > done[k] {
				n, err := s.qps[k].WaitCQ(ctx, cq)
				if err != nil {
					return Row{}, err
				}
				for _, c := range cq[:n] {
					if err := c.Err(); err != nil {
						return Row{}, fmt.Errorf("perf: %s %d: %w", c.Op, c.WRID, err)
					}
				}
				done[k] += n
				total += n
			}
		}
		if ctx.Err() != nil {
			return Row{}, ctx.Err()
		}
		if now := time.Now(); now.Sub(lastT) >= time.Millisecond && total > lastN {
			peak = max(peak, float64((total-lastN)*size*8)/now.Sub(lastT).Seconds()/1e9)
			lastT, lastN = now, total
		}
	}
	el := time.Since(start).Seconds()
	avg := float64(total*size*8) / el / 1e9
	return Row{Bytes: size, Iterations: o.iters, BWPeakGbps: max(peak, avg), BWAvgGbps: avg,
		MsgRateMpps: float64(total) / el / 1e6}, nil
}

// ping runs the client half of a latency test: a message out, the
// server's answer back, o.iters times; half the round trip is the latency
// (perftest's convention).
func ping(ctx context.Context, o perfOpts, s *setup, peer perfInfo, size int) (Row, error) {
	q := s.qps[0]
	lat := make([]float64, 0, o.iters)
	var cq [4]client.Completion
	half := s.per / 2 // the receive half, so an answer never lands on the outgoing bytes
	for i := range o.iters {
		if o.test == "send-lat" {
			if err := q.PostRecv(uint64(i), s.mr, half, size); err != nil {
				return Row{}, err
			}
		}
		t0 := time.Now()
		var err error
		if o.test == "write-lat" {
			err = q.PostWriteImm(uint64(i), s.mr, 0, size, peer.RAddr, peer.Key, uint32(i))
		} else {
			err = q.PostSend(uint64(i), s.mr, 0, size)
		}
		if err != nil {
			return Row{}, err
		}
		got := false
		for !got {
			n, err := q.WaitCQ(ctx, cq[:])
			if err != nil {
				return Row{}, err
			}
			for _, c := range cq[:n] {
				if err := c.Err(); err != nil {
					return Row{}, fmt.Errorf("perf: %s %d: %w", c.Op, c.WRID, err)
				}
				if c.Op == client.CompRecvWriteImm || c.Op == client.CompRecv {
					if c.Bytes != size || (c.Op == client.CompRecvWriteImm && c.Imm != uint32(i)) {
						return Row{}, fmt.Errorf("perf: answer %d: %d bytes imm %d", i, c.Bytes, c.Imm)
					}
					got = true
				}
			}
		}
		lat = append(lat, float64(time.Since(t0))/2e3)
	}
	return latRow(size, lat), nil
}

// pong is the server half: answer each message with one of the same size.
func pong(ctx context.Context, o perfOpts, s *setup, peer perfInfo) error {
	q := s.qps[0]
	var cq [4]client.Completion
	half := s.per / 2
	seq := 0
	post := func() error {
		if o.test == "send-lat" {
			return q.PostRecv(uint64(seq), s.mr, 0, half)
		}
		return nil
	}
	for _, size := range o.sizes() {
		for i := range o.iters {
			if err := post(); err != nil {
				return err
			}
			got := false
			for !got {
				n, err := q.WaitCQ(ctx, cq[:])
				if err != nil {
					return err
				}
				for _, c := range cq[:n] {
					if err := c.Err(); err != nil {
						return fmt.Errorf("perf: %s %d: %w", c.Op, c.WRID, err)
					}
					got = got || c.Op == client.CompRecvWriteImm || c.Op == client.CompRecv
				}
			}
			var err error
			if o.test == "write-lat" {
				err = q.PostWriteImm(uint64(seq), s.mr, half, size, peer.RAddr+uint64(half), peer.Key, uint32(i))
			} else {
				err = q.PostSend(uint64(seq), s.mr, half, size)
			}
			if err != nil {
				return err
			}
			seq++
		}
	}
	return nil
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
	fmt.Fprintf(w, "metaroce perf %s (%s), %d queue pair(s), data verified: %v\n", r.Test, r.Role, r.QPs, r.Verified)
	if len(r.Rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if o.test == "write-bw" || o.test == "read-bw" {
		unit, f := "MB/sec", func(g float64) float64 { return g * 1e9 / 8 / 1e6 }
		if o.gbits {
			unit, f = "Gb/sec", func(g float64) float64 { return g }
		}
		fmt.Fprintf(tw, "#bytes\t#iterations\tBW peak[%s]\tBW average[%s]\tMsgRate[Mpps]\t\n", unit, unit)
		for _, x := range r.Rows {
			fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.6f\t\n", x.Bytes, x.Iterations, f(x.BWPeakGbps), f(x.BWAvgGbps), x.MsgRateMpps)
		}
	} else {
		fmt.Fprintf(tw, "#bytes\t#iterations\tt_min[usec]\tt_max[usec]\tt_typical[usec]\tt_avg[usec]\tt_stdev[usec]\t99%% percentile[usec]\t99.9%% percentile[usec]\t\n")
		for _, x := range r.Rows {
			fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", x.Bytes, x.Iterations, x.TMinUs, x.TMaxUs,
				x.TTypicalUs, x.TAvgUs, x.TStdevUs, x.P99Us, x.P999Us)
		}
	}
	tw.Flush()
}
