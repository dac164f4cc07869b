package testnet

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// udpFlow sends count datagrams of size bytes from one host to another and
// returns how many distinct ones arrived. The receiver reads concurrently and
// the sender paces itself (a burst of 16, then a short pause) so that socket
// buffers never overflow: a lost datagram is one the network dropped.
func udpFlow(t *testing.T, from, to *Host, v6 bool, count, size int) int {
	t.Helper()
	network, dst := "udp4", to.IPv4
	if v6 {
		network, dst = "udp6", to.IPv6
	}
	rx, err := to.ListenUDP(network, netip.AddrPortFrom(dst, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := from.ListenUDP(network, netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if v6 {
		tx.Close()
		tx, err = from.ListenUDP(network, netip.AddrPortFrom(netip.IPv6Unspecified(), 0))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	to4 := rx.LocalAddr().(*net.UDPAddr).AddrPort()

	seen := make([]bool, count)
	var got int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			_ = rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := rx.Read(buf)
			if err != nil {
				return // deadline: the flow is over
			}
			if n < 4 {
				continue
			}
			i := int(binary.BigEndian.Uint32(buf))
			if i < count && !seen[i] {
				seen[i] = true
				got++
			}
		}
	}()
	msg := make([]byte, size)
	for i := 0; i < count; i++ {
		binary.BigEndian.PutUint32(msg, uint32(i))
		if _, err := tx.WriteToUDPAddrPort(msg, to4); err != nil {
			// A cut link reports ENETUNREACH or similar: a lost datagram.
			continue
		}
		if i%16 == 15 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	wg.Wait()
	return got
}

func TestPairUDPAndPing(t *testing.T) {
	p := NewPair(t, Config{})
	for _, v6 := range []bool{false, true} {
		if got := udpFlow(t, p.A, p.B, v6, 100, 64); got != 100 {
			t.Errorf("v6=%v: %d of 100 datagrams arrived", v6, got)
		}
	}
	for _, dst := range []netip.Addr{p.B.IPv4, p.B.IPv6} {
		if err := p.A.Ping(dst, time.Second); err != nil {
			t.Error(err)
		}
	}
}

func TestStarUDPAndPing(t *testing.T) {
	s := NewStar(t, 3, Config{StaticNeighbors: true})
	for _, v6 := range []bool{false, true} {
		if got := udpFlow(t, s.Hosts[0], s.Hosts[2], v6, 200, 1000); got != 200 {
			t.Errorf("v6=%v: %d of 200 datagrams arrived through the switch", v6, got)
		}
	}
	for _, h := range s.Hosts[1:] {
		for _, dst := range []netip.Addr{h.IPv4, h.IPv6} {
			if err := s.Hosts[0].Ping(dst, time.Second); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestSwitchLoss(t *testing.T) {
	s := NewStar(t, 2, Config{})
	const n = 2000
	if err := s.Switch.SetLoss(0.10); err != nil {
		t.Fatal(err)
	}
	got := udpFlow(t, s.Hosts[0], s.Hosts[1], false, n, 64)
	loss := 1 - float64(got)/n
	dropped, err := s.Switch.Dropped()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10%% rule: %d of %d arrived, loss %.1f%%, nft counted %d drops", got, n, 100*loss, dropped)
	// Binomial(2000, 0.1) has a standard deviation of 13.4 packets (0.67%):
	// 5% and 15% are more than 7 deviations away.
	if loss < 0.05 || loss > 0.15 {
		t.Errorf("loss %.3f outside [0.05, 0.15]", loss)
	}
	if int(dropped) != n-got {
		t.Errorf("nft dropped %d, receiver missed %d", dropped, n-got)
	}

	// A port rule drops only what leaves through that port.
	if err := s.Switch.SetLoss(0); err != nil {
		t.Fatal(err)
	}
	if err := s.Switch.SetPortLoss(0, 1); err != nil {
		t.Fatal(err)
	}
	if got := udpFlow(t, s.Hosts[0], s.Hosts[1], true, 200, 64); got != 200 {
		t.Errorf("towards the clean port: %d of 200 arrived", got)
	}
	if got := udpFlow(t, s.Hosts[1], s.Hosts[0], true, 200, 64); got != 0 {
		t.Errorf("towards the 100%% lossy port: %d of 200 arrived", got)
	}
	if err := s.Switch.SetPortLoss(0, 0); err != nil {
		t.Fatal(err)
	}
	if got := udpFlow(t, s.Hosts[1], s.Hosts[0], false, 500, 64); got != 500 {
		t.Errorf("loss removed: %d of 500 arrived", got)
	}
	if err := s.Switch.SetLoss(1.5); err == nil {
		t.Error("SetLoss(1.5) accepted")
	}
}

func TestCutRestore(t *testing.T) {
	for _, static := range []bool{false, true} {
		s := NewStar(t, 2, Config{StaticNeighbors: static})
		a, b := s.Hosts[0], s.Hosts[1]
		for _, v6 := range []bool{false, true} {
			if got := udpFlow(t, a, b, v6, 50, 64); got != 50 {
				t.Fatalf("static=%v v6=%v before cut: %d of 50 arrived", static, v6, got)
			}
		}
		if err := s.Switch.Cut(1); err != nil {
			t.Fatal(err)
		}
		for _, v6 := range []bool{false, true} {
			if got := udpFlow(t, a, b, v6, 50, 64); got != 0 {
				t.Errorf("static=%v v6=%v cut: %d of 50 arrived", static, v6, got)
			}
		}
		if err := s.Switch.Restore(1); err != nil {
			t.Fatal(err)
		}
		for _, dst := range []netip.Addr{b.IPv4, b.IPv6} {
			if err := a.Ping(dst, 2*time.Second); err != nil {
				t.Errorf("static=%v after restore: %v", static, err)
			}
		}
		for _, v6 := range []bool{false, true} {
			if got := udpFlow(t, a, b, v6, 50, 64); got != 50 {
				t.Errorf("static=%v v6=%v restored: %d of 50 arrived", static, v6, got)
			}
		}
	}
}

func TestRateLimit(t *testing.T) {
	s := NewStar(t, 2, Config{})
	const rate = 20_000_000 // bits/s
	if err := s.Switch.SetRate(1, rate, 0); err != nil {
		t.Fatal(err)
	}
	a, b := s.Hosts[0], s.Hosts[1]
	rx, err := b.ListenUDP("udp4", netip.AddrPortFrom(b.IPv4, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := a.ListenUDP("udp4", netip.AddrPortFrom(a.IPv4, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	dst := rx.LocalAddr().(*net.UDPAddr).AddrPort()

	var bytes int
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			_ = rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := rx.Read(buf)
			if err != nil {
				return
			}
			bytes += n + 28 // plus IPv4 and UDP headers
		}
	}()
	msg := make([]byte, 1200)
	const d = time.Second
	start := time.Now()
	for time.Since(start) < d {
		for i := 0; i < 8; i++ {
			_, _ = tx.WriteToUDPAddrPort(msg, dst) // ~60 Mb/s offered
		}
		time.Sleep(time.Millisecond)
	}
	<-done
	got := float64(bytes*8) / d.Seconds()
	t.Logf("tbf %d Mb/s: received %.1f Mb/s", rate/1_000_000, got/1e6)
	// The bucket and the 50 ms queue let a little more than the rate through.
	if got < 0.5*rate || got > 1.3*rate {
		t.Errorf("received %.1f Mb/s through a %d Mb/s limit", got/1e6, rate/1_000_000)
	}
	if err := s.Switch.ClearRate(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Switch.ClearRate(1); err != nil {
		t.Errorf("second ClearRate: %v", err)
	}
}

func TestOffloadsAndQueues(t *testing.T) {
	p := NewPair(t, Config{Link: LinkConfig{NoOffloads: true, Queues: 4, MTU: 3000}})
	out, err := p.A.Run("ethtool", "-k", p.A.Port.Name)
	if errors.Is(err, ErrNoEthtool) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tcp-segmentation-offload: off", "generic-segmentation-offload: off", "generic-receive-offload: off"} {
		if !strings.Contains(out, f) {
			t.Errorf("ethtool -k lacks %q", f)
		}
	}
	out, err = p.B.Run("ls", "/sys/class/net/"+p.B.Port.Name+"/queues")
	if err != nil {
		t.Fatal(err)
	}
	if q := strings.Fields(out); len(q) != 8 {
		t.Errorf("queues: %q, want rx-0..3 and tx-0..3", q)
	}
	out, err = p.B.Run("cat", "/sys/class/net/"+p.B.Port.Name+"/mtu")
	if err != nil || strings.TrimSpace(out) != "3000" {
		t.Errorf("mtu %q, %v", out, err)
	}
	if got := udpFlow(t, p.A, p.B, true, 20, 2900); got != 20 {
		t.Errorf("%d of 20 large datagrams arrived", got)
	}
}

// nsInode identifies the network namespace of the calling thread.
func nsInode(t *testing.T) string {
	t.Helper()
	s, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDoAndGo(t *testing.T) {
	n := New(t)
	ns, err := n.AddNamespace("do")
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	if err := ns.Do(func() error {
		s, err := os.Readlink("/proc/thread-self/ns/net")
		inside = s
		return err
	}); err != nil {
		t.Fatal(err)
	}
	outside := nsInode(t)
	if inside == outside {
		t.Fatalf("Do ran in the caller's namespace %s", inside)
	}
	// Many Do calls never leak the namespace into other goroutines.
	for i := 0; i < 50; i++ {
		if err := ns.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		if got := nsInode(t); got != outside {
			t.Fatalf("caller moved to %s", got)
		}
	}
	if err := ns.Do(func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("panic in Do: got %v", err)
	}
	ch := make(chan string)
	if err := ns.Go(func() {
		s, _ := os.Readlink("/proc/thread-self/ns/net")
		ch <- s
	}); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got != inside {
		t.Errorf("Go ran in %s, Do in %s", got, inside)
	}
	if _, err := ns.Ifindex("lo"); err != nil {
		t.Error(err)
	}
}

func listNetns(t *testing.T) string {
	t.Helper()
	out, err := run("ip", "netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCloseRemovesEverything(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	s, err := OpenStar(2, Config{StaticNeighbors: true, Link: LinkConfig{Queues: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var names, ifaces []string
	for _, ns := range s.Namespaces() {
		names = append(names, ns.Name)
	}
	for _, p := range s.Switch.Ports {
		ifaces = append(ifaces, p.Name, p.Peer.Name)
	}
	// A process left inside a namespace must not keep it alive.
	cmd := s.Hosts[0].Command(t.Context(), "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(50 * time.Millisecond) // let ip netns exec enter
	if !strings.Contains(listNetns(t), names[0]) {
		t.Fatal("namespace missing before Close")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	list := listNetns(t)
	for _, name := range names {
		if strings.Contains(list, name) {
			t.Errorf("%s still listed after Close", name)
		}
	}
	links, err := run("ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if strings.Contains(links, ifc) {
			t.Errorf("interface %s visible in the root namespace", ifc)
		}
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case <-waitErr:
	case <-time.After(2 * time.Second):
		t.Error("process inside the namespace survived Close")
	}
}

func TestSweep(t *testing.T) {
	n := New(t)
	live, err := n.AddNamespace("live")
	if err != nil {
		t.Fatal(err)
	}
	// A namespace "left by" a process with our pid but another start time,
	// that is, an earlier process whose pid was reused.
	stale := Prefix + strconv.Itoa(os.Getpid()) + "-zzzz-1ab-stale"
	// A name with the prefix that does not parse: not ours to judge.
	odd := Prefix + "odd"
	for _, name := range []string{stale, odd} {
		if _, err := run("ip", "netns", "add", name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = run("ip", "netns", "del", name) })
	}
	deleted, err := sweep()
	if err != nil {
		t.Fatal(err)
	}
	// Another test binary starting now may sweep the stale one first, so
	// "deleted" may lack it; it must never hold anything else.
	for _, d := range deleted {
		if d != stale {
			t.Errorf("sweep deleted %q", d)
		}
	}
	list := listNetns(t)
	if !strings.Contains(list, live.Name) || !strings.Contains(list, odd) {
		t.Errorf("sweep removed a live or foreign namespace:\n%s", list)
	}
	if strings.Contains(list, stale) {
		t.Errorf("stale namespace survived sweep")
	}
}

func TestIfaceNameFits(t *testing.T) {
	for _, c := range []uint32{1, 1000, 1 << 20, 1<<32 - 1} {
		if s := ifaceName(4194304, c, 0xff, 'a'); len(s) > 15 {
			t.Errorf("ifaceName(%d) = %q, %d bytes", c, s, len(s))
		}
	}
	if a, b := ifaceName(1, 2, 3, 'a'), ifaceName(1, 2, 3, 'b'); a == b {
		t.Error("ends of a pair share a name")
	}
}
