package bpf

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// XDP actions (enum xdp_action).
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

var actionNames = map[uint32]string{0: "ABORTED", xdpDrop: "DROP", xdpPass: "PASS", 3: "TX", xdpRedirect: "REDIRECT"}

// xdpMD mirrors struct xdp_md, the context BPF_PROG_TEST_RUN takes for XDP.
type xdpMD struct {
	Data, DataEnd, DataMeta uint32
	IngressIfindex          uint32
	RxQueueIndex            uint32
	EgressIfindex           uint32
}

// requireBPF skips the test unless the process may load BPF programs.
func requireBPF(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading XDP programs needs root (CAP_BPF, CAP_NET_ADMIN)")
	}
}

// load loads the program and closes it when the test ends. It skips when the
// kernel refuses BPF altogether, and fails on any other error (a verifier
// rejection is a bug).
func load(t *testing.T, opts Options) *Program {
	t.Helper()
	requireBPF(t)
	p, err := Load(opts)
	if errors.Is(err, unix.EPERM) || errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel refuses to load BPF: %v", err)
	}
	if err != nil {
		t.Fatalf("Load(%+v): %+v", opts, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// run runs the program once on frame through BPF_PROG_TEST_RUN and returns
// its action and the change in the counters. ctx is nil or an *xdpMD.
func run(t *testing.T, p *Program, frame []byte, ctx *xdpMD) (uint32, Counters) {
	t.Helper()
	before := counters(t, p)
	opts := &ebpf.RunOptions{Data: frame}
	if ctx != nil {
		opts.Context = *ctx
	}
	action, err := p.prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return action, counters(t, p).sub(before)
}

func counters(t *testing.T, p *Program) Counters {
	t.Helper()
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c Counters) sub(o Counters) Counters {
	return Counters{
		Redirected:      c.Redirected - o.Redirected,
		Passed:          c.Passed - o.Passed,
		DroppedShort:    c.DroppedShort - o.DroppedShort,
		DroppedVersion:  c.DroppedVersion - o.DroppedVersion,
		DroppedFragment: c.DroppedFragment - o.DroppedFragment,
		RedirectFailed:  c.RedirectFailed - o.RedirectFailed,
	}
}

// checkRun runs frame and checks the action and that exactly the counters in
// want moved.
func checkRun(t *testing.T, p *Program, frame []byte, ctx *xdpMD, wantAction uint32, want Counters) {
	t.Helper()
	action, got := run(t, p, frame, ctx)
	if action != wantAction {
		t.Errorf("action %s, want %s", actionNames[action], actionNames[wantAction])
	}
	if got != want {
		t.Errorf("counters moved by %+v, want %+v", got, want)
	}
}

// xskSocket returns a bare AF_XDP socket, closed when the test ends. This
// kernel (6.18) accepts a socket into an XSKMAP before it has a UMEM, rings
// or a bind, which is all a test run needs to make redirect_map succeed.
func xskSocket(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("AF_XDP socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

var (
	// Each packet bumps exactly one counter.
	oneRedirected      = Counters{Redirected: 1}
	onePassed          = Counters{Passed: 1}
	oneDroppedShort    = Counters{DroppedShort: 1}
	oneDroppedVersion  = Counters{DroppedVersion: 1}
	oneDroppedFragment = Counters{DroppedFragment: 1}
	oneRedirectFailed  = Counters{RedirectFailed: 1}
)

// steerCase is one frame and what the program must do with it when queue 0
// has no socket; a MetaRoCE packet then falls back to XDP_PASS.
type steerCase struct {
	name   string
	frame  []byte
	action uint32
	moved  Counters
}

func steerCases(port uint16) []steerCase {
	mr := func(p packet) packet { p.dport = port; p.payload = metaroce(1, 64); return p }
	return []steerCase{
		{"ipv4", mr(packet{}).frame(), xdpPass, oneRedirectFailed},
		{"ipv6", mr(packet{ipv6: true}).frame(), xdpPass, oneRedirectFailed},
		{"vlan ipv4", mr(packet{vlan: true}).frame(), xdpPass, oneRedirectFailed},
		{"vlan ipv6", mr(packet{vlan: true, ipv6: true}).frame(), xdpPass, oneRedirectFailed},
		{"ipv4 options", mr(packet{options: 12}).frame(), xdpPass, oneRedirectFailed},
		{"ipv4 max options", mr(packet{options: 40}).frame(), xdpPass, oneRedirectFailed},
		{"ipv4 DF set", mr(packet{fragOff: 0x4000}).frame(), xdpPass, oneRedirectFailed},
		{"payload exactly 12", packet{dport: port, payload: metaroce(1, 12)}.frame(), xdpPass, oneRedirectFailed},
		{"ethernet padding", append(packet{dport: port, payload: metaroce(1, 12)}.frame(), 0, 0, 0, 0), xdpPass, oneRedirectFailed},

		{"other port", packet{dport: port + 1, payload: metaroce(1, 64)}.frame(), xdpPass, onePassed},
		{"port as source only", packet{sport: port, dport: 53, payload: metaroce(1, 64)}.frame(), xdpPass, onePassed},
		{"arp", arpRequest(), xdpPass, onePassed},
		{"tcp to port", mr(packet{proto: protoTCP}).frame(), xdpPass, onePassed},
		{"ipv6 tcp to port", mr(packet{ipv6: true, proto: protoTCP}).frame(), xdpPass, onePassed},
		{"ipv6 extension header", mr(packet{ipv6: true, ext: true}).frame(), xdpPass, onePassed},
		{"ipv4 non-first fragment", mr(packet{fragOff: 185}).frame(), xdpPass, onePassed},
		{"truncated ipv4 header", ethernet(etherTypeIPv4, false), xdpPass, onePassed},
		{"truncated udp header", mr(packet{}).frame()[:14+20+4], xdpPass, onePassed},
		{"ipv4 ihl below 5", func() []byte {
			b := mr(packet{}).frame()
			b[14] = 0x44
			return b
		}(), xdpPass, onePassed},
		{"double vlan", func() []byte {
			// An 802.1ad outer tag is not parsed: the frame is not MetaRoCE.
			b := mr(packet{vlan: true}).frame()
			b[12], b[13] = 0x88, 0xa8
			return b
		}(), xdpPass, onePassed},

		{"payload 11", packet{dport: port, payload: metaroce(1, 11)}.frame(), xdpDrop, oneDroppedShort},
		{"empty payload", packet{dport: port}.frame(), xdpDrop, oneDroppedShort},
		{"ipv6 payload 11", packet{ipv6: true, dport: port, payload: metaroce(1, 11)}.frame(), xdpDrop, oneDroppedShort},
		{"vlan payload 11", packet{vlan: true, dport: port, payload: metaroce(1, 11)}.frame(), xdpDrop, oneDroppedShort},
		{"udp length beyond frame", mr(packet{udpLen: 8 + 65}).frame(), xdpDrop, oneDroppedShort},
		{"udp length below header", mr(packet{udpLen: 4}).frame(), xdpDrop, oneDroppedShort},
		{"frame cut in payload", mr(packet{}).frame()[:14+20+8+6], xdpDrop, oneDroppedShort},

		{"version 2", packet{dport: port, payload: metaroce(2, 64)}.frame(), xdpDrop, oneDroppedVersion},
		{"version 0", packet{dport: port, payload: metaroce(0, 64)}.frame(), xdpDrop, oneDroppedVersion},
		{"ipv6 version 2", packet{ipv6: true, dport: port, payload: metaroce(2, 64)}.frame(), xdpDrop, oneDroppedVersion},
		{"vlan version 2", packet{vlan: true, dport: port, payload: metaroce(2, 64)}.frame(), xdpDrop, oneDroppedVersion},

		{"ipv4 first fragment", mr(packet{fragOff: ipv4MF}).frame(), xdpDrop, oneDroppedFragment},
		{"vlan ipv4 first fragment", mr(packet{vlan: true, fragOff: ipv4MF}).frame(), xdpDrop, oneDroppedFragment},
	}
}

// variants runs f for both program variants.
func variants(t *testing.T, f func(t *testing.T, frags bool)) {
	for _, frags := range []bool{false, true} {
		name := "xdp"
		if frags {
			name = "xdp.frags"
		}
		t.Run(name, func(t *testing.T) { f(t, frags) })
	}
}

func TestSteer(t *testing.T) {
	variants(t, func(t *testing.T, frags bool) {
		p := load(t, Options{Frags: frags})
		for _, tc := range steerCases(DefaultPort) {
			t.Run(tc.name, func(t *testing.T) {
				checkRun(t, p, tc.frame, nil, tc.action, tc.moved)
			})
		}
	})
}

// TestRedirectToSocket checks the redirect itself: with a socket in queue 0's
// slot, test runs (which arrive on queue 0) get XDP_REDIRECT; once the socket
// is deleted they fall back to XDP_PASS.
func TestRedirectToSocket(t *testing.T) {
	variants(t, func(t *testing.T, frags bool) {
		p := load(t, Options{Frags: frags})
		v4 := packet{dport: DefaultPort, payload: metaroce(1, 64)}.frame()
		v6 := packet{ipv6: true, vlan: true, dport: DefaultPort, payload: metaroce(1, 64)}.frame()

		if err := p.SetSocket(0, xskSocket(t)); err != nil {
			t.Fatal(err)
		}
		checkRun(t, p, v4, nil, xdpRedirect, oneRedirected)
		checkRun(t, p, v6, nil, xdpRedirect, oneRedirected)
		// Only MetaRoCE goes to the socket.
		checkRun(t, p, arpRequest(), nil, xdpPass, onePassed)
		checkRun(t, p, packet{dport: DefaultPort, payload: metaroce(2, 64)}.frame(), nil, xdpDrop, oneDroppedVersion)

		if err := p.DeleteSocket(0); err != nil {
			t.Fatal(err)
		}
		checkRun(t, p, v4, nil, xdpPass, oneRedirectFailed)
		if err := p.DeleteSocket(0); err != nil {
			t.Errorf("deleting an empty slot: %v", err)
		}
	})
}

// TestPort checks that the port really is a load-time constant: a program
// loaded for port 5000 steers 5000 and ignores the default port.
func TestPort(t *testing.T) {
	variants(t, func(t *testing.T, frags bool) {
		p := load(t, Options{Port: 5000, Frags: frags})
		if p.Port() != 5000 {
			t.Fatalf("Port() = %d", p.Port())
		}
		for _, tc := range steerCases(5000) {
			t.Run(tc.name, func(t *testing.T) {
				checkRun(t, p, tc.frame, nil, tc.action, tc.moved)
			})
		}
		t.Run("default port", func(t *testing.T) {
			checkRun(t, p, packet{dport: DefaultPort, payload: metaroce(1, 64)}.frame(), nil, xdpPass, onePassed)
			checkRun(t, p, packet{dport: DefaultPort, payload: metaroce(2, 64)}.frame(), nil, xdpPass, onePassed)
		})
	})
}

// TestJumbo runs a 9000-byte MetaRoCE frame. The test run gives a frags
// program a multi-buffer frame (first buffer about 3.5 KB, the rest in
// fragments) and a plain program only what fits in one buffer.
func TestJumbo(t *testing.T) {
	jumbo := packet{dport: DefaultPort, payload: metaroce(1, 9000-20-8)}.frame()

	t.Run("xdp.frags", func(t *testing.T) {
		p := load(t, Options{Frags: true})
		checkRun(t, p, jumbo, nil, xdpPass, oneRedirectFailed)
		if err := p.SetSocket(0, xskSocket(t)); err != nil {
			t.Fatal(err)
		}
		checkRun(t, p, jumbo, nil, xdpRedirect, oneRedirected)
	})
	t.Run("xdp", func(t *testing.T) {
		// The plain program sees a frame cut at the end of the first
		// buffer, shorter than its UDP length says: dropped as short.
		// Attached, such a program cannot even be installed on an
		// interface with a jumbo MTU (ERANGE), which is why Frags exists.
		p := load(t, Options{})
		checkRun(t, p, jumbo, nil, xdpDrop, oneDroppedShort)
	})
}

// TestHeadersOutsideFirstBuffer makes the test run put only 20 bytes in the
// first buffer (kernel 6.18 takes the linear size from xdp_md.data_end), so
// the frags program must copy every header with bpf_xdp_load_bytes.
func TestHeadersOutsideFirstBuffer(t *testing.T) {
	p := load(t, Options{Frags: true})
	ctx := &xdpMD{DataEnd: 20}

	// Confirm the kernel honours the linear size before relying on it.
	frame := packet{dport: DefaultPort, payload: metaroce(1, 5000)}.frame()
	var out xdpMD
	if _, err := p.prog.Run(&ebpf.RunOptions{Data: frame, Context: *ctx, ContextOut: &out}); err != nil {
		t.Fatal(err)
	}
	if out.DataEnd != ctx.DataEnd {
		t.Skipf("kernel ignored the requested linear size (data_end %d)", out.DataEnd)
	}

	checkRun(t, p, frame, ctx, xdpPass, oneRedirectFailed)
	checkRun(t, p, packet{vlan: true, ipv6: true, dport: DefaultPort, payload: metaroce(1, 5000)}.frame(), ctx, xdpPass, oneRedirectFailed)
	checkRun(t, p, packet{dport: DefaultPort, payload: metaroce(2, 5000)}.frame(), ctx, xdpDrop, oneDroppedVersion)
	checkRun(t, p, packet{dport: DefaultPort + 1, payload: metaroce(1, 5000)}.frame(), ctx, xdpPass, onePassed)
	checkRun(t, p, packet{dport: DefaultPort, fragOff: ipv4MF, payload: metaroce(1, 5000)}.frame(), ctx, xdpDrop, oneDroppedFragment)
	if err := p.SetSocket(0, xskSocket(t)); err != nil {
		t.Fatal(err)
	}
	checkRun(t, p, frame, ctx, xdpRedirect, oneRedirected)
}

func TestOptions(t *testing.T) {
	if _, err := Load(Options{Queues: maxQueues + 1}); err == nil {
		t.Error("Load accepted too many queues")
	}

	p := load(t, Options{Queues: 4})
	if p.Port() != DefaultPort || p.Frags() {
		t.Errorf("defaults: port %d frags %v", p.Port(), p.Frags())
	}
	// The loader quietly creates a map without BTF when the kernel rejects
	// its BTF (as it does for an enum array key); keep the counters' BTF so
	// bpftool can print them. (An XSKMAP takes no BTF at all.)
	info, err := p.counters.Info()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.BTFID(); !ok {
		t.Error("counters map was created without BTF")
	}

	fd := xskSocket(t)
	if err := p.SetSocket(3, fd); err != nil {
		t.Errorf("queue 3 of 4: %v", err)
	}
	if err := p.SetSocket(4, fd); err == nil {
		t.Error("queue 4 of 4 accepted")
	}
	if err := p.SetSocket(0, -1); err == nil {
		t.Error("fd -1 accepted")
	}
	// Only AF_XDP sockets go in the map.
	udp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(udp)
	if err := p.SetSocket(0, udp); err == nil {
		t.Error("UDP socket accepted")
	}
}

func TestCloseTwice(t *testing.T) {
	p := load(t, Options{})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Attach(1, ModeAuto); err == nil {
		t.Error("Attach after Close succeeded")
	}
}

// TestChecksum checks the frame builder's checksum against a well-known
// worked example (the IPv4 header of Wikipedia's "Internet checksum" article,
// checksum 0xb861).
func TestChecksum(t *testing.T) {
	hdr := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
		0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := checksum(0, hdr); got != 0xb861 {
		t.Errorf("checksum %#04x, want 0xb861", got)
	}
	// A built header verifies: summing it with its checksum gives 0.
	ip := packet{options: 8, payload: metaroce(1, 33)}.frame()[14 : 14+28]
	if got := checksum(0, ip); got != 0 {
		t.Errorf("built IPv4 header does not verify: %#04x", got)
	}
}

// adjustMetaAllowed asks the kernel whether an XDP program may call
// bpf_xdp_adjust_meta, with the smallest program that does.
func adjustMetaAllowed(t *testing.T) bool {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R2, -8),
		asm.FnXdpAdjustMeta.Call(),
		asm.Mov.Imm(asm.R0, 2),
		asm.Return(),
	}})
	if err != nil {
		if strings.Contains(err.Error(), "bpf_xdp_adjust_meta") {
			return false
		}
		t.Fatalf("load the probe program: %v", err)
	}
	p.Close()
	return true
}

// TestLoadFallsBackWithoutStamp: Load gives the stamping program where the
// kernel lets XDP programs call bpf_xdp_adjust_meta, and the same program
// without the stamp where it refuses (6.18.44-fc did), both variants.
func TestLoadFallsBackWithoutStamp(t *testing.T) {
	requireBPF(t)
	want := adjustMetaAllowed(t)
	for _, frags := range []bool{false, true} {
		p, err := Load(Options{Frags: frags})
		if err != nil {
			t.Fatalf("frags %v: %v", frags, err)
		}
		if p.Stamped() != want {
			t.Errorf("frags %v: Stamped() = %v, want %v (the kernel allows adjust_meta: %v)", frags, p.Stamped(), want, want)
		}
		p.Close()
	}
}
