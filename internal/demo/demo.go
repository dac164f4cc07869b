package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/perf"
	"github.com/metaroce/metaroce/internal/testnet"
)

// DemoResult is the JSON of `metaroce demo`. metaroce's figures are those
// of applications: `metaroce perf` processes on client/, a server in one
// host's namespace and a client in the other's, talking to the daemons
// through shared-memory queue pairs.
type DemoResult struct {
	// OK is the verdict: every part of the demo ran, each without error,
	// and every byte was verified. The command exits non-zero without it.
	OK bool `json:"ok"`
	// DataVerified: every WRITE completed without error and each perf
	// server found its memory holding what its client wrote.
	DataVerified bool `json:"data_verified"`
	// Messages counts the WRITEs of the bandwidth and latency tests.
	Messages    int     `json:"messages"`
	GoodputGbps float64 `json:"goodput_gbps"`
	// The bandwidth test's goodput over 1 ms windows: the median window,
	// the 10th percentile and the windows with nothing completed; an
	// average well below the median means stalls.
	GoodputWindowP50Gbps float64 `json:"goodput_window_p50_gbps"`
	GoodputWindowP10Gbps float64 `json:"goodput_window_p10_gbps"`
	StalledWindows       int     `json:"stalled_windows"`
	// Every latency here is a whole round trip, as its name says: a
	// 64-byte WRITE out and the peer's answer back, through the client
	// API on both ends (perf write-lat).
	WriteRTTP50us float64 `json:"write_rtt_p50_us"`
	WriteRTTP99us float64 `json:"write_rtt_p99_us"`
	// WriteAckRTTP50us is, in the same test, from a WRITE's post to its
	// own completion (the peer's engine acknowledged it): the round trip
	// less the peer application's two hops (perf's ack_rtt_p50_us).
	WriteAckRTTP50us float64 `json:"write_ack_rtt_p50_us"`
	XDPMode          string  `json:"xdp_mode"`
	ZeroCopy         bool    `json:"zerocopy"`
	Backend          string  `json:"backend"`
	BackendWhy       string  `json:"backend_note,omitempty"`
	Loss             float64 `json:"loss"`
	MTU              int     `json:"mtu"`
	// Congestion is the daemons' congestion controller: -cc's, or
	// metaroced's default.
	Congestion    string `json:"congestion"`
	SwitchDropped uint64 `json:"switch_dropped"`
	Retransmitted uint64 `json:"packets_retransmitted"`
	PacketsSent   uint64 `json:"packets_sent"`
	// AcksReceived is the acks and NACKs that came back to the sender:
	// each is a packet the hosts' kernels carry too.
	AcksReceived uint64 `json:"acks_received"`
	// What became of the retransmitted packets, to tell loss from
	// spurious retransmission on a link the switch did not drop on: the
	// sender's retransmissions of data the receiver had (its acks said so
	// later), its timeouts, the data packets the receiver got twice, and
	// the frames the receiving host dropped before its engine (the AF_XDP
	// socket's RX ring full or fill ring empty, summed over its engines).
	SpuriousRetx       uint64  `json:"spurious_retransmissions"`
	Timeouts           uint64  `json:"timeouts"`
	ReceiverDuplicates uint64  `json:"receiver_duplicates"`
	ReceiverXSKDropped uint64  `json:"receiver_xsk_dropped"`
	UDPBackendGbps     float64 `json:"udp_backend_gbps"`
	// SenderCPU and ReceiverCPU are the two engines' CPU per packet in the
	// bandwidth test (demo_cpu.go), beside the raw baseline's sending
	// thread's per frame (RawSenderCPUNsPerFrame, its kernel share
	// RawSenderKernelShare): where the sending core's time goes.
	SenderCPU              *EngineCPU `json:"sender_engine_cpu,omitempty"`
	ReceiverCPU            *EngineCPU `json:"receiver_engine_cpu,omitempty"`
	RawSenderCPUNsPerFrame float64    `json:"raw_sender_cpu_ns_per_frame,omitempty"`
	RawSenderKernelShare   float64    `json:"raw_sender_kernel_share,omitempty"`
	RawAFXDPGbps           float64    `json:"raw_afxdp_gbps"`
	RawAFXDPRTTP50us       float64    `json:"raw_afxdp_rtt_p50_us"`
	// TCPRTTP50us is a TCP ping-pong's round trip (64 bytes, TCP_NODELAY,
	// blocking reads and writes) through the same lossy switch.
	TCPRTTP50us float64 `json:"tcp_rtt_p50_us"`
	TCPRTTP99us float64 `json:"tcp_rtt_p99_us"`
	// TCPGbps is Linux TCP with veth offloads off on the path, so the
	// switch drops wire packets as it does ours: the like-for-like
	// figure. TCPOffloadsOnGbps is what users get by default, where the
	// switch drops 64 KB GSO super-packets instead (docs/platform.md).
	TCPGbps           float64  `json:"tcp_gbps"`
	TCPOffloadsOnGbps float64  `json:"tcp_offloads_on_gbps"`
	GoodputVsRaw      float64  `json:"goodput_vs_raw_afxdp"`
	GoodputVsTCP      float64  `json:"goodput_vs_tcp"`
	Baselines         any      `json:"baselines,omitempty"`
	Errors            []string `json:"errors,omitempty"`
	WallS             float64  `json:"wall_s"`
}

// topologies are -topology's values; topologyUsage is its help in every
// topology's flag set, so each -h lists them all.
const (
	topologies    = "star, leafspine, incast, libfabric, mpi, conns or planes"
	topologyUsage = "the demo's fabric: star (two hosts through one switch), leafspine (two leaves over four spines, one cut mid-run), " +
		"incast (senders into one ECN-marking port), libfabric (fi_pingpong through the metaroce provider and libfabric's own) " +
		"mpi (Open MPI's OSU micro-benchmarks and a data-parallel training loop over the metaroce provider and over TCP, -hosts x -ranks-per-host) " +
		"conns (10,000 connections between two daemons, each with a verified WRITE, and a ping-pong beside them) " +
		"or planes (two hosts on -planes independent planes, one plane blackholed and restored mid-transfer, MPTCP and TCP beside); " +
		"each has its own flags: -topology NAME -h (docs/demo.md)"
)

type demoOpts struct {
	mtu      int
	pcapDir  string
	sweep    bool
	out      string
	loss     float64
	bytes    int64
	size     int
	latCount int
	udpBytes int64
	ipv6     bool
	duration time.Duration
	cc       string
}

// ccYAML is the configuration line choosing the daemons' controller, if
// one was named.
func ccYAML(name string) string {
	if name == "" {
		return ""
	}
	return "congestion: " + name + "\n"
}

// daemonCC is the controller the daemons run for -cc name: name, or
// metaroced's default when it is empty.
func daemonCC(name string) string {
	if name == "" {
		return config.Defaults().Congestion
	}
	return name
}

// checkCC refuses a congestion controller the daemons do not have,
// naming the flag and the ones they do ("" is the daemon's default).
func checkCC(name string) error {
	if !congestion.Known(name) {
		return cli.UsageError("-cc %q: want one of %s", name, strings.Join(congestion.Names(), ", "))
	}
	return nil
}

func Run(args []string, out io.Writer) error {
	switch t := demoTopologyArg(args); t {
	case "leafspine":
		return runLeafSpineDemo(args, out)
	case "incast":
		return runIncastDemo(args, out)
	case "libfabric":
		return runLibfabricDemo(args, out)
	case "mpi":
		return runMPIDemo(args, out)
	case "conns":
		return runConnsDemo(args, out)
	case "planes":
		return runPlanesDemo(args, out)
	case "", "star":
	default:
		return cli.UsageError("-topology %q: want %s", t, topologies)
	}
	fs := cli.NewFlagSet("metaroce demo", out)
	fs.String("topology", "star", topologyUsage)
	o := demoOpts{}
	fs.Float64Var(&o.loss, "loss", 0.01, "fraction of packets the switch namespace drops")
	fs.IntVar(&o.mtu, "mtu", 1500, "IP MTU of every link, 576 to 9000: the daemons, the raw AF_XDP and TCP baselines all run at it")
	fs.BoolVar(&o.sweep, "sweep", false, "a loss sweep instead: 0, 0.1, 1, 5 and 10% loss, metaroce beside TCP (offloads on and off) at each; CSV and PNG into -out")
	fs.StringVar(&o.out, "out", ".", "-sweep: directory for sweep.csv and sweep.png")
	fs.StringVar(&o.pcapDir, "pcap", "", "capture each switch port to DIR/*.pcap with tcpdump (hundreds of MB a port at the default sizes; read them with metaroce decode, docs/operate.md)")
	cli.SizeVar(fs, &o.bytes, "bytes", 256<<20, "bytes of WRITEs in the bandwidth test")
	cli.IntSizeVar(fs, &o.size, "size", 64<<10, "bytes per WRITE in the bandwidth test")
	fs.IntVar(&o.latCount, "lat-count", 2000, "WRITEs of 64 bytes in the latency test")
	cli.SizeVar(fs, &o.udpBytes, "udp-bytes", 64<<20, "bytes of WRITEs over the UDP backend")
	fs.BoolVar(&o.ipv6, "ipv6", false, "run over IPv6")
	cli.DurationVar(fs, &o.duration, "baseline-duration", 2*time.Second, "duration of each baseline measurement")
	fs.StringVar(&o.cc, "cc", "", "congestion controller of the daemons (empty: the daemon's default, metaroce; docs/spec.md §8.9.4)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := checkCC(o.cc); err != nil {
		return err
	}
	if err := cli.Check(cli.Int("mtu", o.mtu, 576, 9000), cli.Prob("loss", o.loss), cli.Range{Flag: "bytes", Value: float64(o.bytes), Min: 1, Max: 1 << 40},
		cli.Int("size", o.size, 1, 1<<30), cli.Int("lat-count", o.latCount, 1, 1<<24),
		cli.Range{Flag: "udp-bytes", Value: float64(o.udpBytes), Min: 1, Max: 1 << 40}); err != nil {
		return err
	}
	if o.duration <= 0 {
		return cli.UsageError("-baseline-duration %v: want a positive duration", o.duration)
	}
	if o.sweep && o.pcapDir != "" {
		// The sweep's runs at five loss rates, TCP's among them, share
		// one switch; a capture of one rate is the star demo's -loss.
		return cli.UsageError("-sweep with -pcap: -pcap captures the star demo, not a sweep; capture one loss rate with -loss L -pcap DIR")
	}
	if o.pcapDir != "" {
		// Before the namespaces are built (testnet.CaptureAll would say
		// the same after): the demo's own deps (make deps-demo) do not
		// include tcpdump.
		if _, err := exec.LookPath("tcpdump"); err != nil {
			return fmt.Errorf("demo: -pcap: %w", testnet.ErrNoTcpdump)
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("demo: needs root (network namespaces, XDP, AF_XDP): run with sudo")
	}
	if o.sweep {
		return runSweep(o, *asJSON, out)
	}
	start := time.Now()
	res, err := demo(o)
	if res != nil {
		res.WallS = time.Since(start).Seconds()
		if *asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			enc.Encode(res)
		} else {
			printDemo(out, res)
		}
	}
	return err
}

func demo(o demoOpts) (*DemoResult, error) {
	testnet.Sweep() // namespaces an earlier, killed demo left behind
	star, err := testnet.OpenStar(2, testnet.Config{Link: testnet.LinkConfig{MTU: o.mtu}})
	if err != nil {
		return nil, err
	}
	defer star.Close()
	if err := star.Switch.SetLoss(o.loss); err != nil {
		return nil, err
	}
	var caps testnet.CaptureSet
	if o.pcapDir != "" {
		if err := os.MkdirAll(o.pcapDir, 0o755); err != nil {
			return nil, fmt.Errorf("demo: -pcap: %w", err)
		}
		if caps, err = testnet.CaptureAll(o.pcapDir, "", star.Switch.Ports...); err != nil {
			return nil, fmt.Errorf("demo: -pcap: %w", err)
		}
	}
	defer caps.Stop() // idempotent; nil is a no-op
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metaroce-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	a, b := star.Hosts[0], star.Hosts[1]
	peer := b.IPv4
	if o.ipv6 {
		peer = b.IPv6
	}
	res := &DemoResult{Loss: o.loss, MTU: o.mtu, Congestion: daemonCC(o.cc)}

	// metaroce over AF_XDP: bandwidth, then latency, each a perf server
	// on b and a client on a, separate processes.
	mtuYAML := fmt.Sprintf("mtu: %d\n", o.mtu)
	mtuYAML += ccYAML(o.cc)
	err = withDaemonsYAML(self, dir, "afxdp", o.ipv6, a, b, mtuYAML, func(ca, cb *daemon.Client) error {
		st, err := ca.Do(daemon.Request{Op: "status"})
		if err != nil {
			return err
		}
		if len(st.Engines) == 0 {
			return errors.New("daemon status: no engines")
		}
		inf := st.Engines[0].Link
		res.Backend, res.XDPMode, res.ZeroCopy, res.BackendWhy = inf.Backend, inf.XDPMode, inf.ZeroCopy, inf.Why
		msgs := max(1, o.bytes/int64(o.size))
		sa, sb := sampleCPU(ca, true, cpuEvery), sampleCPU(cb, false, cpuEvery)
		bw, err := runPerfPair(self, dir, "afxdp", a, b, peer, 18515, "write-bw", fmt.Sprintf("-s %d -n %d -seed 5", o.size, msgs))
		res.SenderCPU, res.ReceiverCPU = sa.result(), sb.result()
		if err != nil {
			return fmt.Errorf("perf write-bw: %w", err)
		}
		lat, err := runPerfPair(self, dir, "afxdp", a, b, peer, 18516, "write-lat", fmt.Sprintf("-s 64 -n %d", o.latCount))
		if err != nil {
			return fmt.Errorf("perf write-lat: %w", err)
		}
		res.Messages = int(msgs) + o.latCount
		res.GoodputGbps = bw.Rows[0].BWAvgGbps
		res.GoodputWindowP50Gbps, res.GoodputWindowP10Gbps = bw.Rows[0].WindowP50Gbps, bw.Rows[0].WindowP10Gbps
		res.StalledWindows = bw.Rows[0].StalledWindows
		res.WriteRTTP50us, res.WriteRTTP99us = lat.Rows[0].RTTP50us, lat.Rows[0].RTTP99us
		res.WriteAckRTTP50us = lat.Rows[0].AckRTTP50us
		res.DataVerified = bw.Verified && lat.Verified
		countersAfter(res, func() (*daemon.Response, error) { return ca.Do(daemon.Request{Op: "status"}) }, star.Switch.Dropped)
		lossCounters(res, func() (*daemon.Response, error) { return ca.Do(daemon.Request{Op: "status"}) },
			func() (*daemon.Response, error) { return cb.Do(daemon.Request{Op: "status"}) })
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("demo: afxdp run: %w", err)
	}
	// The same transport over the UDP-socket backend.
	err = withDaemonsYAML(self, dir, "udp", o.ipv6, a, b, mtuYAML, func(ca, cb *daemon.Client) error {
		bw, err := runPerfPair(self, dir, "udp", a, b, peer, 18517, "write-bw",
			fmt.Sprintf("-s %d -n %d -seed 6", o.size, max(1, o.udpBytes/int64(o.size))))
		if err != nil {
			return fmt.Errorf("perf write-bw: %w", err)
		}
		res.DataVerified = res.DataVerified && bw.Verified
		res.UDPBackendGbps = bw.Rows[0].BWAvgGbps
		return nil
	})
	if err != nil {
		res.DataVerified = false // the UDP backend's WRITEs were not verified
		res.Errors = append(res.Errors, "udp backend: "+err.Error())
	}
	// The capture holds metaroce's traffic only: the raw baseline would
	// add millions of packets on the same port that look like MetaRoCE.
	if err := caps.Stop(); err != nil {
		res.Errors = append(res.Errors, "pcap: "+err.Error())
	}
	baselines(res, star, o)
	if res.RawAFXDPGbps > 0 {
		res.GoodputVsRaw = res.GoodputGbps / res.RawAFXDPGbps
	}
	if res.TCPGbps > 0 {
		res.GoodputVsTCP = res.GoodputGbps / res.TCPGbps
	}
	res.OK = res.DataVerified && len(res.Errors) == 0
	switch {
	case !res.DataVerified:
		return res, errors.New("demo: data not verified")
	case !res.OK:
		return res, fmt.Errorf("demo: %d part(s) failed: %s", len(res.Errors), strings.Join(res.Errors, "; "))
	}
	return res, nil
}

// countersAfter records the daemon's data packets sent and retransmitted
// and the switch's drops after the runs. A counter it cannot read is an
// error of the run (the verdict is then false), never a panic or a zero
// that reads as "nothing lost".
func countersAfter(res *DemoResult, status func() (*daemon.Response, error), dropped func() (uint64, error)) {
	st, err := status()
	switch {
	case err != nil:
		res.Errors = append(res.Errors, "daemon status after the runs: "+err.Error())
	case len(st.Engines) == 0:
		res.Errors = append(res.Errors, "daemon status after the runs: no engines")
	default:
		res.Retransmitted = st.Engines[0].Transport.DataRetransmitted
		res.PacketsSent = st.Engines[0].Transport.DataSent
		res.AcksReceived = st.Engines[0].Transport.AcksReceived
		for _, n := range st.Engines[0].Transport.NacksReceived {
			res.AcksReceived += n
		}
	}
	n, err := dropped()
	if err != nil {
		res.Errors = append(res.Errors, "switch drop counter: "+err.Error())
		return
	}
	res.SwitchDropped = n
}

// lossCounters records where the retransmissions came from (DemoResult's
// SpuriousRetx and the fields after it), from the sender's and the
// receiver's status after the runs.
func lossCounters(res *DemoResult, sender, receiver func() (*daemon.Response, error)) {
	st, err := sender()
	if err != nil {
		res.Errors = append(res.Errors, "sender status after the runs: "+err.Error())
		return
	}
	for _, e := range st.Engines {
		res.SpuriousRetx += e.Transport.SpuriousRetx
		res.Timeouts += e.Transport.Timeouts
	}
	rt, err := receiver()
	if err != nil {
		res.Errors = append(res.Errors, "receiver status after the runs: "+err.Error())
		return
	}
	for _, e := range rt.Engines {
		res.ReceiverDuplicates += e.Transport.Duplicates
		if x := e.XSK; x != nil {
			res.ReceiverXSKDropped += x.RxRingFull + x.RxFillRingEmptyDescs + x.RxDropped
		}
	}
}

// runPerfPair runs `metaroce perf test` as a server process in b's
// namespace and a client process in a's, against the daemons withDaemons
// started, and returns the client's report. The server checks the data
// (bandwidth tests) and the client reports its verdict.
func runPerfPair(self, dir, backend string, a, b *testnet.Host, peer netip.Addr, port int, test, args string) (*perf.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := startPerfPair(ctx, self, dir, backend, a, b, peer, port, test, args)
	if err != nil {
		return nil, err
	}
	if err := r.wait(); err != nil {
		return nil, err
	}
	var res perf.Result
	if err := json.Unmarshal(r.cliOut.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("client report: %v: %s", err, r.cliOut.String())
	}
	if len(res.Rows) == 0 {
		return nil, fmt.Errorf("client report without results: %s", r.cliOut.String())
	}
	return &res, nil
}

// perfRun is a perf server and client running.
type perfRun struct {
	srv, cli       *exec.Cmd
	srvOut, cliOut bytes.Buffer
}

// startPerfPair starts the server, then the client (which retries its
// out-of-band connection until the server listens).
func startPerfPair(ctx context.Context, self, dir, backend string, a, b *testnet.Host, peer netip.Addr, port int, test, args string) (*perfRun, error) {
	r := &perfRun{}
	common := strings.Fields(args)
	sa := filepath.Join(dir, a.Label+"-"+backend+".sock")
	sb := filepath.Join(dir, b.Label+"-"+backend+".sock")
	r.srv = b.Command(ctx, self, append([]string{"perf", test, "-socket", sb, "-port", fmt.Sprint(port), "-json"}, common...)...)
	r.srv.Stdout, r.srv.Stderr = &r.srvOut, &r.srvOut
	if err := r.srv.Start(); err != nil {
		return nil, err
	}
	r.cli = a.Command(ctx, self, append([]string{"perf", test, "-socket", sa, "-port", fmt.Sprint(port),
		"-connect", peer.String(), "-json"}, common...)...)
	r.cli.Stdout, r.cli.Stderr = &r.cliOut, &r.cliOut
	if err := r.cli.Start(); err != nil {
		r.srv.Process.Kill()
		r.srv.Wait()
		return nil, err
	}
	return r, nil
}

// wait waits for both and reports the first failure with both outputs.
func (r *perfRun) wait() error {
	cerr, serr := r.cli.Wait(), r.srv.Wait()
	if cerr != nil || serr != nil {
		return fmt.Errorf("client: %v: %s; server: %v: %s", cerr, strings.TrimSpace(r.cliOut.String()),
			serr, strings.TrimSpace(r.srvOut.String()))
	}
	return nil
}

// withDaemons starts metaroced (this binary's daemon command) in both
// hosts' namespaces with the given backend, runs f, and stops them.
func withDaemons(self, dir, backend string, ipv6 bool, a, b *testnet.Host, f func(ca, cb *daemon.Client) error) error {
	return withDaemonsYAML(self, dir, backend, ipv6, a, b, "", f)
}

// withDaemonsYAML is withDaemons with extra top-level configuration lines
// (the leaf-spine demo sets the number of paths).
func withDaemonsYAML(self, dir, backend string, ipv6 bool, a, b *testnet.Host, extra string, f func(ca, cb *daemon.Client) error) error {
	var nss []*testnet.Namespace
	var ifaces []string
	for _, h := range []*testnet.Host{a, b} {
		nss = append(nss, h.Namespace)
		ifaces = append(ifaces, fmt.Sprintf("interfaces:\n  - name: %s\n    backend: %s\n", h.Port.Name, backend))
	}
	return withDaemonsIn(self, dir, backend, ipv6, nss, ifaces, extra, f)
}

// withDaemonsIn is withDaemonsYAML for two namespaces whose interfaces
// section of the configuration is given whole (ifaces[i] for nss[i]).
func withDaemonsIn(self, dir, backend string, ipv6 bool, nss []*testnet.Namespace, ifaces []string, extra string, f func(ca, cb *daemon.Client) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				c.Process.Kill()
				<-done
			}
		}
	}()
	var clients []*daemon.Client
	for i, h := range nss {
		sock := filepath.Join(dir, h.Label+"-"+backend+".sock")
		cfg := filepath.Join(dir, h.Label+"-"+backend+".yaml")
		yaml := ifaces[i] + fmt.Sprintf("control_socket: %s\nmetrics_address: \"\"\nlog_level: warn\n", sock) + extra
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return err
		}
		// Each daemon's engine on its own CPU, as the raw baseline's
		// threads are: two spinning engines sharing a core would
		// measure the scheduler, not the transport.
		args := []string{"daemon", "-config", cfg, "-cpu", fmt.Sprint(i % runtime.NumCPU())}
		if ipv6 {
			args = append(args, "-ipv6")
		}
		if d := os.Getenv("METAROCE_DEMO_PROFILE_DIR"); d != "" {
			// For finding where the time goes: a CPU profile per daemon.
			args = append(args, "-cpuprofile", filepath.Join(d, h.Label+"-"+backend+".prof"))
		}
		c := h.Command(ctx, self, args...)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return err
		}
		cmds = append(cmds, c)
		cl, err := daemon.Dial(sock, 10*time.Second)
		if err != nil {
			return err
		}
		defer cl.Close()
		clients = append(clients, cl)
	}
	return f(clients[0], clients[1])
}

func printDemo(w io.Writer, r *DemoResult) {
	fmt.Fprintf(w, "metaroce demo: 2 hosts through a switch namespace dropping %.1f%%, MTU %d; verdict ok %v\n", r.Loss*100, r.MTU, r.OK)
	fmt.Fprintf(w, "backend    %s, XDP %s, zero-copy %v\n", r.Backend, r.XDPMode, r.ZeroCopy)
	fmt.Fprintf(w, "data       verified %v, %d WRITEs (metaroce perf processes through the client library)\n", r.DataVerified, r.Messages)
	fmt.Fprintf(w, "goodput    %.2f Gb/s (1 ms windows: median %.2f, p10 %.2f, %d stalled; UDP backend %.2f Gb/s)\n",
		r.GoodputGbps, r.GoodputWindowP50Gbps, r.GoodputWindowP10Gbps, r.StalledWindows, r.UDPBackendGbps)
	fmt.Fprintf(w, "round trip WRITE p50 %.1f us, p99 %.1f us (its own completion, the peer's ack: p50 %.1f us)\n",
		r.WriteRTTP50us, r.WriteRTTP99us, r.WriteAckRTTP50us)
	fmt.Fprintf(w, "baselines  raw AF_XDP %.2f Gb/s (round trip p50 %.1f us), Linux TCP %.2f Gb/s (offloads on: %.2f; ping-pong round trip p50 %.1f us)\n",
		r.RawAFXDPGbps, r.RawAFXDPRTTP50us, r.TCPGbps, r.TCPOffloadsOnGbps, r.TCPRTTP50us)
	fmt.Fprintf(w, "ratios     %.2f of raw AF_XDP, %.2fx TCP\n", r.GoodputVsRaw, r.GoodputVsTCP)
	if s := r.SenderCPU; s != nil {
		fmt.Fprintf(w, "CPU        sending engine %.0f ns a packet (%.0f%% in the kernel)", s.NsPerPacket, 100*s.KernelShare)
		if c := r.ReceiverCPU; c != nil {
			fmt.Fprintf(w, ", receiving engine %.0f ns (%.0f%%)", c.NsPerPacket, 100*c.KernelShare)
		}
		fmt.Fprintf(w, "; raw AF_XDP sender %.0f ns a frame (%.0f%%)\n", r.RawSenderCPUNsPerFrame, 100*r.RawSenderKernelShare)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error      %s\n", e)
	}
}
