package demo

// The connections demo: many connections between two metaroced (AF_XDP,
// two namespaces through one switch), each carrying one WRITE that the
// receiving side checks where it landed, and a WRITE ping-pong measured
// with none of them and again with all of them open and idle, in the same
// run. It is issue 22's acceptance: 10,000 connections, connect p99 under
// 50 ms, and idle connections that cost the busy one nothing.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
)

// ConnsResult is the JSON of `metaroce demo -topology conns`.
type ConnsResult struct {
	// OK: every connection came up and carried its WRITE, verified, and
	// every ping-pong message came back.
	OK        bool `json:"ok"`
	Conns     int  `json:"conns"`
	Sessions  int  `json:"sessions"` // per side
	Connected int  `json:"connected"`
	// Verified counts connections whose WRITE the receiving side found,
	// byte for byte, at its own offset.
	Verified int `json:"verified"`
	// CreateS is the wall time to make every queue pair on both sides;
	// ConnectS to connect them all (Sessions connects in flight at once).
	CreateS  float64 `json:"create_s"`
	ConnectS float64 `json:"connect_s"`
	// Connect latency: one Connect call, the application's view.
	ConnectP50Ms float64 `json:"connect_p50_ms"`
	ConnectP99Ms float64 `json:"connect_p99_ms"`
	ConnectMaxMs float64 `json:"connect_max_ms"`
	// ConnectRxRingFull counts the packets the kernel dropped during the
	// connects because an engine had not read its AF_XDP RX ring.
	ConnectRxRingFull uint64 `json:"connect_rx_ring_full"`
	// Ping-pong round trips (a 64-byte WRITE with immediate each way),
	// with no other connection, then with Conns idle ones; Ratio is
	// idle p50 over alone p50.
	PingAloneP50Us float64 `json:"ping_alone_p50_us"`
	PingAloneP99Us float64 `json:"ping_alone_p99_us"`
	PingIdleP50Us  float64 `json:"ping_idle_p50_us"`
	PingIdleP99Us  float64 `json:"ping_idle_p99_us"`
	PingRatio      float64 `json:"ping_p50_ratio"`
	// What each daemon (sender, receiver) held with every connection
	// open: descriptors, memory mappings, resident memory.
	DaemonFDs   []int `json:"daemon_fds"`
	DaemonMaps  []int `json:"daemon_maps"`
	DaemonRSSMB []int `json:"daemon_rss_mb"`
	// WriteWindow is how many WRITEs a session had outstanding; during
	// the WRITEs both daemons together retransmitted WriteRetransmitted
	// data packets and had WriteTimeouts retransmission timeouts (every
	// packet of a lossless link arrives, so each retransmission is
	// spurious: host delay read as loss).
	// WriteRxRingFull counts the packets the kernel dropped meanwhile
	// because an engine had not read its AF_XDP RX ring.
	WriteWindow        int    `json:"write_window"`
	WriteRetransmitted uint64 `json:"write_retransmitted"`
	WriteTimeouts      uint64 `json:"write_timeouts"`
	WriteRxRingFull    uint64 `json:"write_rx_ring_full"`
	// Daemons is each daemon's status at the end (its engines' transport
	// counters: retransmissions, keepalives, failures).
	Daemons [][]daemon.EngineStatus `json:"daemons,omitempty"`
	Errors  []string                `json:"errors,omitempty"`
	WallS   float64                 `json:"wall_s"`
}

// The receiving application is a process of its own, as applications
// are, and so that each side's descriptors (one per queue pair, its
// doorbell end) count against a limit of their own. It tells the demo its
// queue pairs' numbers and regions on stdout (connsInfo), and, sent a line
// on stdin, checks every slot and answers connsCheck; it exits at EOF.
type connsInfo struct {
	Sessions []connsSession `json:"sessions"`
}

type connsSession struct {
	QPNs   []uint32 `json:"qpns"`
	Tokens []uint64 `json:"tokens"` // each queue pair's, which the connect presents
	Addr   uint64   `json:"addr"`
	Key    uint32   `json:"key"`
}

type connsCheck struct {
	Verified int    `json:"verified"`
	Error    string `json:"error,omitempty"`
}

func connsReceiver(sock string, o connsOpts, in io.Reader, out io.Writer) error {
	if err := raiseNOFILE(); err != nil {
		return err
	}
	sb, err := openSide(sock, o.conns, o.perSession)
	defer sb.close()
	enc := json.NewEncoder(out)
	if err != nil {
		enc.Encode(connsCheck{Error: err.Error()})
		return err
	}
	var info connsInfo
	for i := range sb.qps {
		s := connsSession{Addr: sb.mrs[i].Addr, Key: sb.mrs[i].Key}
		for _, q := range sb.qps[i] {
			s.QPNs = append(s.QPNs, q.Num)
			s.Tokens = append(s.Tokens, q.Token)
		}
		info.Sessions = append(info.Sessions, s)
	}
	if err := enc.Encode(info); err != nil {
		return err
	}
	r := bufio.NewReader(in)
	if _, err := r.ReadString('\n'); err != nil {
		return nil // the demo ended before the check: it says why
	}
	var v connsCheck
	var want [connSlot]byte
	for i := range sb.mrs {
		got := sb.mrs[i].Bytes()
		for k := range sb.qps[i] {
			connPattern(want[:], i, k)
			if string(got[k*connSlot:(k+1)*connSlot]) == string(want[:]) {
				v.Verified++
			}
		}
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	io.Copy(io.Discard, r)
	return nil
}

type receiverProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	dec  *json.Decoder
	info connsInfo
}

func startReceiver(self, sock string, o connsOpts) (*receiverProc, error) {
	cmd := exec.Command(self, "demo", "-topology", "conns", "-receiver", sock, "-conns", strconv.Itoa(o.conns),
		"-per-session", strconv.Itoa(o.perSession))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &receiverProc{cmd: cmd, in: in, dec: json.NewDecoder(outp)}
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		p.stop()
		return nil, fmt.Errorf("receiver: %w", err)
	}
	var bad connsCheck
	if json.Unmarshal(raw, &bad) == nil && bad.Error != "" {
		p.stop()
		return nil, fmt.Errorf("receiver: %s", bad.Error)
	}
	if err := json.Unmarshal(raw, &p.info); err != nil {
		p.stop()
		return nil, fmt.Errorf("receiver: %w", err)
	}
	return p, nil
}

func (p *receiverProc) check() (int, error) {
	if _, err := io.WriteString(p.in, "check\n"); err != nil {
		return 0, err
	}
	var v connsCheck
	if err := p.dec.Decode(&v); err != nil {
		return 0, fmt.Errorf("receiver: %w", err)
	}
	return v.Verified, nil
}

func (p *receiverProc) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

type connsOpts struct {
	conns, perSession, pings int
	writeWindow              int // WRITEs outstanding per session
	limit                    time.Duration
	yaml                     string // extra daemon configuration
}

func runConnsDemo(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce demo -topology conns", out)
	fs.String("topology", "conns", topologyUsage)
	o := connsOpts{}
	fs.IntVar(&o.conns, "conns", 10000, "connections between the two daemons, each carrying one verified WRITE")
	fs.IntVar(&o.perSession, "per-session", 1000, "queue pairs per application session (the daemon allows 1024 by default)")
	fs.IntVar(&o.pings, "pings", 2000, "ping-pong round trips, alone and beside the idle connections")
	fs.IntVar(&o.writeWindow, "write-window", 8, "WRITEs a session has outstanding (as many as -per-session: all in one burst)")
	cli.DurationVar(fs, &o.limit, "connect-limit", 10*time.Second, "one connect not up by then fails")
	fs.StringVar(&o.yaml, "daemon-yaml", "", "extra top-level lines of both daemons' configuration (e.g. 'transport: {max_rto: 1s}')")
	receiver := fs.String("receiver", "", "internal: be the receiving application on the daemon whose control socket this is (the demo starts it as a process of its own)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.Check(cli.Int("conns", o.conns, 1, 100000), cli.Int("per-session", o.perSession, 1, 1<<16),
		cli.Int("pings", o.pings, 1, 1<<24), cli.Int("write-window", o.writeWindow, 1, 1<<16)); err != nil {
		return err
	}
	if *receiver != "" {
		return connsReceiver(*receiver, o, os.Stdin, out)
	}
	if os.Geteuid() != 0 {
		return errors.New("demo: needs root (network namespaces, XDP, AF_XDP): run with sudo")
	}
	start := time.Now()
	res, err := connsDemo(o)
	if res != nil {
		res.WallS = time.Since(start).Seconds()
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
		if *asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			enc.Encode(res)
		} else {
			fmt.Fprintf(out, "%d connections (%d sessions a side): %d connected, %d WRITEs verified; create %.1f s, connect %.1f s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d RX ring overflows\n",
				res.Conns, res.Sessions, res.Connected, res.Verified, res.CreateS, res.ConnectS, res.ConnectP50Ms, res.ConnectP99Ms, res.ConnectMaxMs, res.ConnectRxRingFull)
			fmt.Fprintf(out, "ping-pong p50 alone %.1f us, beside %d idle %.1f us (x%.2f); p99 %.1f / %.1f us\n",
				res.PingAloneP50Us, res.Conns, res.PingIdleP50Us, res.PingRatio, res.PingAloneP99Us, res.PingIdleP99Us)
			fmt.Fprintf(out, "WRITEs %d outstanding a session: %d retransmitted (spurious: the link is lossless), %d timeouts, %d RX ring overflows\n",
				res.WriteWindow, res.WriteRetransmitted, res.WriteTimeouts, res.WriteRxRingFull)
			fmt.Fprintf(out, "daemons: descriptors %v, mappings %v, RSS %v MB; ok %v\n", res.DaemonFDs, res.DaemonMaps, res.DaemonRSSMB, res.OK)
		}
	}
	if err == nil && !res.OK {
		err = errors.New("demo: connections: not every connection carried its WRITE")
	}
	return err
}

// raiseNOFILE lifts this process's descriptor limit (and so the daemons'
// it starts) to what deploy/metaroced.service's LimitNOFILE gives the
// daemon: the application side of 10,000 queue pairs a daemon holds a
// descriptor each too.
func raiseNOFILE() error {
	rl := unix.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if unix.Setrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		return nil
	}
	// Not allowed to raise the hard limit here (a container without
	// CAP_SYS_RESOURCE): take it whole, as the Go runtime does.
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("demo: RLIMIT_NOFILE: %w", err)
	}
	rl.Cur = rl.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("demo: raise RLIMIT_NOFILE to %d: %w", rl.Cur, err)
	}
	return nil
}

// connsSide is one side's sessions: sessions[i] holds qps[i], and region
// mrs[i] (connSlot bytes per queue pair).
type connsSide struct {
	clients []*client.Client
	mems    []*client.Memory
	mrs     []*client.MR
	qps     [][]*client.QP
}

const connSlot = 64

func (s *connsSide) close() {
	for _, c := range s.clients {
		c.Close()
	}
	for _, m := range s.mems {
		m.Close()
	}
}

// openSide makes n queue pairs over sessions of at most per, in parallel.
func openSide(sock string, n, per int) (*connsSide, error) {
	s := &connsSide{}
	for i := 0; i < n; i += per {
		c, err := client.Dial(sock)
		if err != nil {
			return s, err
		}
		s.clients = append(s.clients, c)
		k := min(per, n-i)
		m, err := client.Alloc(k * connSlot)
		if err != nil {
			return s, err
		}
		s.mems = append(s.mems, m)
		mr, err := c.RegisterMemory(m, 0, k*connSlot, client.LocalWrite|client.RemoteWrite)
		if err != nil {
			return s, err
		}
		s.mrs = append(s.mrs, mr)
		s.qps = append(s.qps, make([]*client.QP, k))
	}
	errs := make([]error, len(s.clients))
	var wg sync.WaitGroup
	for i, c := range s.clients {
		wg.Go(func() {
			for k := range s.qps[i] {
				q, err := c.CreateQP(client.QPOptions{SQSlots: 4, CQSlots: 8})
				if err != nil {
					errs[i] = fmt.Errorf("session %d queue pair %d: %w", i, k, err)
					return
				}
				s.qps[i][k] = q
			}
		})
	}
	wg.Wait()
	return s, errors.Join(errs...)
}

// connPattern is connection (i, k)'s WRITE.
func connPattern(b []byte, i, k int) {
	for j := 0; j < len(b); j += 8 {
		binary.LittleEndian.PutUint64(b[j:], uint64(i)<<40|uint64(k)<<20|uint64(j)|0x5a<<56)
	}
}

func connsDemo(o connsOpts) (*ConnsResult, error) {
	res := &ConnsResult{Conns: o.conns, Sessions: (o.conns + o.perSession - 1) / o.perSession}
	if err := raiseNOFILE(); err != nil {
		return res, err
	}
	testnet.Sweep()
	star, err := testnet.OpenStar(2, testnet.Config{})
	if err != nil {
		return res, err
	}
	defer star.Close()
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "metaroce-conns-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	a, b := star.Hosts[0], star.Hosts[1]
	ds, err := startDaemons(self, dir, "afxdp", "conns", []*testnet.Host{a, b}, strings.ReplaceAll(o.yaml, `\n`, "\n")+"\n")
	if err != nil {
		return res, err
	}
	defer ds.stop()
	defer func() {
		for _, c := range ds.clients {
			if st, err := c.Do(daemon.Request{Op: "status"}); err == nil {
				res.Daemons = append(res.Daemons, st.Engines)
			}
		}
	}()

	// The ping-pong pair, alone first.
	pa, err := openSide(ds.socks[0], 1, 1)
	if pa != nil {
		defer pa.close()
	}
	if err != nil {
		return res, err
	}
	pb, err := openSide(ds.socks[1], 1, 1)
	if pb != nil {
		defer pb.close()
	}
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.limit)
	err = pa.qps[0][0].Connect(ctx, b.IPv4, pb.qps[0][0].Num, pb.qps[0][0].Token)
	cancel()
	if err != nil {
		return res, fmt.Errorf("ping-pong connect: %w", err)
	}
	stopPong := make(chan struct{})
	pongDone := make(chan error, 1)
	go func() { pongDone <- connsPong(pb, pa.mrs[0], stopPong) }()
	defer func() { close(stopPong); <-pongDone }()
	alone, err := connsPing(pa, pb.mrs[0], o.pings)
	if err != nil {
		return res, fmt.Errorf("ping-pong alone: %w", err)
	}
	res.PingAloneP50Us, res.PingAloneP99Us = pct(alone, 0.5), pct(alone, 0.99)

	// The connections: both sides' queue pairs, then connects, one
	// session's in sequence, every session at once.
	t0 := time.Now()
	sa, err := openSide(ds.socks[0], o.conns, o.perSession)
	if sa != nil {
		defer sa.close()
	}
	if err != nil {
		return res, fmt.Errorf("sender's queue pairs: %w", err)
	}
	rcv, err := startReceiver(self, ds.socks[1], o)
	if err != nil {
		return res, err
	}
	defer rcv.stop()
	res.CreateS = time.Since(t0).Seconds()
	if len(rcv.info.Sessions) != len(sa.qps) {
		return res, fmt.Errorf("receiver: %d sessions, want %d", len(rcv.info.Sessions), len(sa.qps))
	}
	for i, s := range rcv.info.Sessions {
		if len(s.QPNs) != len(sa.qps[i]) || len(s.Tokens) != len(s.QPNs) {
			return res, fmt.Errorf("receiver: session %d has %d queue pairs and %d tokens, want %d", i, len(s.QPNs), len(s.Tokens), len(sa.qps[i]))
		}
	}
	c0, err := ds.stats()
	if err != nil {
		return res, err
	}
	t0 = time.Now()
	lat := make([][]float64, len(sa.clients))
	errs := make([]error, len(sa.clients))
	var wg sync.WaitGroup
	for i := range sa.clients {
		wg.Go(func() {
			for k, q := range sa.qps[i] {
				ctx, cancel := context.WithTimeout(context.Background(), o.limit)
				c0 := time.Now()
				err := q.Connect(ctx, b.IPv4, rcv.info.Sessions[i].QPNs[k], rcv.info.Sessions[i].Tokens[k])
				cancel()
				if err != nil {
					errs[i] = fmt.Errorf("session %d connect %d: %w", i, k, err)
					return
				}
				lat[i] = append(lat[i], float64(time.Since(c0))/1e6)
			}
		})
	}
	wg.Wait()
	res.ConnectS = time.Since(t0).Seconds()
	all := slices.Concat(lat...)
	res.Connected = len(all)
	res.ConnectP50Ms, res.ConnectP99Ms = pct(all, 0.5), pct(all, 0.99)
	if len(all) > 0 {
		res.ConnectMaxMs = slices.Max(all)
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	c1, err := ds.stats()
	if err != nil {
		return res, err
	}
	for i := range c1 {
		res.ConnectRxRingFull += c1[i].sub(c0[i]).RxRingFull
	}

	// One WRITE on each, then the receiver's check of every slot.
	res.WriteWindow = o.writeWindow
	s0, err := ds.stats()
	if err != nil {
		return res, err
	}
	for i := range sa.clients {
		wg.Go(func() { errs[i] = connsWrite(sa, rcv.info.Sessions[i], i, o.writeWindow) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	s1, err := ds.stats()
	if err != nil {
		return res, err
	}
	for i := range s1 {
		d := s1[i].sub(s0[i])
		res.WriteRetransmitted += d.Retransmitted
		res.WriteTimeouts += d.Timeouts
		res.WriteRxRingFull += d.RxRingFull
	}
	if res.Verified, err = rcv.check(); err != nil {
		return res, err
	}
	for _, cmd := range ds.cmds {
		fds, maps, rss := procUsage(cmd.Process.Pid)
		res.DaemonFDs, res.DaemonMaps, res.DaemonRSSMB = append(res.DaemonFDs, fds), append(res.DaemonMaps, maps), append(res.DaemonRSSMB, rss)
	}

	// The ping-pong again, every connection open and idle.
	time.Sleep(200 * time.Millisecond)
	idle, err := connsPing(pa, pb.mrs[0], o.pings)
	if err != nil {
		return res, fmt.Errorf("ping-pong beside idle connections: %w", err)
	}
	res.PingIdleP50Us, res.PingIdleP99Us = pct(idle, 0.5), pct(idle, 0.99)
	if res.PingAloneP50Us > 0 {
		res.PingRatio = res.PingIdleP50Us / res.PingAloneP50Us
	}
	res.OK = res.Verified == o.conns && res.Connected == o.conns
	return res, nil
}

// connsWrite posts session i's WRITEs, one per queue pair, at most
// window outstanding at a time, and waits for each to complete.
// (`-write-window` as large as a session's queue pairs posts them all in
// one burst: issue 22 once counted 36,153 retransmissions for 4,943
// one-packet WRITEs so posted.)
func connsWrite(sa *connsSide, peer connsSession, i, window int) error {
	mr := sa.mrs[i]
	var cq [4]client.Completion
	wait := func(k int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, err := sa.qps[i][k].WaitCQ(ctx, cq[:])
		if err != nil {
			return fmt.Errorf("session %d write %d: %w", i, k, err)
		}
		for _, c := range cq[:n] {
			if err := c.Err(); err != nil {
				return fmt.Errorf("session %d write %d: %w", i, k, err)
			}
		}
		return nil
	}
	for k, q := range sa.qps[i] {
		connPattern(mr.Bytes()[k*connSlot:(k+1)*connSlot], i, k)
		if err := q.PostWrite(uint64(k), mr, k*connSlot, connSlot, peer.Addr+uint64(k*connSlot), peer.Key); err != nil {
			return fmt.Errorf("session %d write %d: %w", i, k, err)
		}
		if k >= window {
			if err := wait(k - window); err != nil {
				return err
			}
		}
	}
	for k := max(0, len(sa.qps[i])-window); k < len(sa.qps[i]); k++ {
		if err := wait(k); err != nil {
			return err
		}
	}
	return nil
}

// connsPing runs n round trips on the ping-pong pair: a 64-byte WRITE
// with immediate out, the echo back; it returns the round trips in us.
func connsPing(pa *connsSide, peer *client.MR, n int) ([]float64, error) {
	q, mr := pa.qps[0][0], pa.mrs[0]
	var cq [4]client.Completion
	rtt := make([]float64, 0, n)
	for i := range n {
		t0 := time.Now()
		if err := q.PostWriteImm(uint64(i), mr, 0, connSlot, peer.Addr, peer.Key, uint32(i)); err != nil {
			return nil, err
		}
		for got := false; !got; {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			k, err := q.WaitCQ(ctx, cq[:])
			cancel()
			if err != nil {
				return nil, fmt.Errorf("round trip %d: %w", i, err)
			}
			for _, c := range cq[:k] {
				if err := c.Err(); err != nil {
					return nil, err
				}
				got = got || (c.Op == client.CompRecvWriteImm && c.Imm == uint32(i))
			}
		}
		rtt = append(rtt, float64(time.Since(t0))/1e3)
	}
	return rtt, nil
}

// connsPong echoes every WRITE with immediate that lands until stop.
func connsPong(pb *connsSide, peer *client.MR, stop chan struct{}) error {
	q, mr := pb.qps[0][0], pb.mrs[0]
	var cq [4]client.Completion
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		k, err := q.WaitCQ(ctx, cq[:])
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			return err
		}
		for _, c := range cq[:k] {
			if c.Op == client.CompRecvWriteImm {
				if err := q.PostWriteImm(uint64(c.Imm), mr, 0, connSlot, peer.Addr, peer.Key, c.Imm); err != nil {
					return err
				}
			}
		}
	}
}

// pct is the q-quantile of v (sorted in place).
func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

// procUsage reads a process's descriptors, mappings and resident MB.
func procUsage(pid int) (fds, maps, rssMB int) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if ents, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
		fds = len(ents)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "maps")); err == nil {
		maps = strings.Count(string(b), "\n")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.Atoi(f[1])
				rssMB = kb / 1024
			}
		}
	}
	return fds, maps, rssMB
}
