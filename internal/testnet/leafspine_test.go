package testnet

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// portsFlow sends per datagrams from each source port in ports, from one
// host to another, and returns how many arrived from each port. Each source
// port is its own socket, so each is its own flow for the leaves' L4 hash.
// The sender paces itself and the receiver's buffer holds every datagram
// of the run, so that no socket buffer overflows: a missing datagram is one
// the fabric dropped.
func portsFlow(t *testing.T, from, to *Host, v6 bool, ports []uint16, dport uint16, per int) map[uint16]int {
	t.Helper()
	network, src, dst := "udp4", from.IPv4, to.IPv4
	if v6 {
		network, src, dst = "udp6", from.IPv6, to.IPv6
	}
	rx, err := to.ListenUDP(network, netip.AddrPortFrom(dst, dport))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	// Room for all of them (each takes ~1 KiB of buffer): on a loaded
	// machine the reader can be descheduled for milliseconds, and the
	// default 208 KiB then overflowed (470 of 512 arrived in one CI run).
	if err := forceRcvBuf(rx, len(ports)*per*2048); err != nil {
		t.Fatal(err)
	}
	raddr := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	var txs []*net.UDPConn
	defer func() {
		for _, c := range txs {
			c.Close()
		}
	}()
	for _, p := range ports {
		c, err := from.ListenUDP(network, netip.AddrPortFrom(src, p))
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, c)
	}

	got := map[uint16]int{}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			_ = rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, from, err := rx.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // deadline: the flows are over
			}
			if n >= 2 && binary.BigEndian.Uint16(buf) == from.Port() {
				got[from.Port()]++
			}
		}
	})
	msg := make([]byte, 200)
	for k := 0; k < per; k++ {
		for i, c := range txs {
			binary.BigEndian.PutUint16(msg, ports[i])
			_, _ = c.WriteToUDPAddrPort(msg, raddr) // a blackholed datagram is simply not counted
			if i%16 == 15 {
				time.Sleep(200 * time.Microsecond)
			}
		}
	}
	wg.Wait()
	return got
}

// forceRcvBuf sets c's receive buffer to n bytes past net.core.rmem_max
// (SO_RCVBUFFORCE: the tests run as root).
func forceRcvBuf(c *net.UDPConn, n int) error {
	sc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
	}); err != nil {
		return err
	}
	return serr
}

// countDelta reads the spines' counters and returns the difference from
// before, with the new reading.
func countDelta(t *testing.T, f *LeafSpine, before []SpineCount) (delta, now []SpineCount) {
	t.Helper()
	now, err := f.SpineCounts()
	if err != nil {
		t.Fatal(err)
	}
	delta = make([]SpineCount, len(now))
	for i := range now {
		delta[i] = now[i].Sub(before[i])
	}
	return delta, now
}

// TestLeafSpineECMP checks the fabric does what a datacenter's does: the
// leaves spread flows with different UDP source ports over all spines, the
// kernel's own route lookup (SpineOf) predicts each flow's spine exactly,
// and a cut spine carries nothing afterwards, whether blackholed (flows
// hashed onto it are lost) or with its links down (the leaves rehash).
func TestLeafSpineECMP(t *testing.T) {
	f := NewLeafSpine(t, LeafSpineConfig{StaticNeighbors: true})
	if len(f.Spines) != 4 || len(f.Leaves[0].Hosts) != 2 || len(f.Leaves[1].Hosts) != 2 {
		t.Fatalf("default fabric: %d spines, %d+%d hosts", len(f.Spines), len(f.Leaves[0].Hosts), len(f.Leaves[1].Hosts))
	}
	a, b := f.Leaves[0].Hosts[0], f.Leaves[1].Hosts[1]
	const nports, per = 128, 4
	ports := make([]uint16, nports)
	for i := range ports {
		ports[i] = uint16(49152 + 7*i) // spread over the range the transport draws entropy from
	}
	// The receiver's port is fixed, so that SpineOf can be asked about
	// exactly the flows sent.
	const dport = 4791
	predict := func(v6 bool) (map[uint16]int, []int) {
		dst := b.IPv4
		if v6 {
			dst = b.IPv6
		}
		of := map[uint16]int{}
		n := make([]int, len(f.Spines))
		for _, p := range ports {
			s, err := f.SpineOf(a, dst, "udp", p, dport)
			if err != nil {
				t.Fatal(err)
			}
			of[p] = s
			n[s]++
		}
		return of, n
	}

	before, err := f.SpineCounts()
	if err != nil {
		t.Fatal(err)
	}
	var spineOf map[uint16]int
	var want []int
	for _, v6 := range []bool{false, true} {
		of, n := predict(v6)
		if !v6 {
			spineOf, want = of, n
		}
		got := total(portsFlow(t, a, b, v6, ports, dport, per))
		var delta []SpineCount
		delta, before = countDelta(t, f, before)
		if got != nports*per {
			t.Errorf("v6=%v: %d of %d datagrams arrived", v6, got, nports*per)
		}
		sum := 0
		for _, d := range delta {
			sum += int(d.ToLeaf[1])
		}
		if sum != nports*per {
			t.Fatalf("v6=%v: spines forwarded %d datagrams towards leaf 1, sent %d", v6, sum, nports*per)
		}
		for s, d := range delta {
			share := float64(d.ToLeaf[1]) / float64(sum)
			t.Logf("v6=%v spine %d: %d datagrams (%.0f%%), ip route get predicted %d flows", v6, s, d.ToLeaf[1], 100*share, n[s])
			if n[s] == 0 {
				t.Errorf("v6=%v: ip route get hashes no flow onto spine %d", v6, s)
			}
			// 128 flows over 4 spines: a fair hash puts 32 +- 4.9 (one
			// standard deviation) on each; 10% to 40% is 13 to 51 flows,
			// beyond 3.5 deviations either way.
			if share < 0.10 || share > 0.40 {
				t.Errorf("v6=%v: spine %d carried %.0f%% of the datagrams, want 10%% to 40%%", v6, s, 100*share)
			}
			// The kernel's own lookup agrees with its forwarding, for
			// IPv6 too only because the leaves clear the hash the
			// sending socket put on the packet (leafspine_hash.go).
			if int(d.ToLeaf[1]) != n[s]*per {
				t.Errorf("v6=%v: spine %d forwarded %d datagrams, ip route get predicted %d", v6, s, d.ToLeaf[1], n[s]*per)
			}
		}
	}

	// Blackhole spine 1: it forwards nothing, the flows hashed onto it are
	// lost, all others arrive.
	const cut = 1
	if err := f.CutSpine(cut, Blackhole); err != nil {
		t.Fatal(err)
	}
	got := total(portsFlow(t, a, b, false, ports, dport, per))
	delta, now := countDelta(t, f, before)
	before = now
	if delta[cut].Packets != 0 {
		t.Errorf("blackholed spine forwarded %d packets", delta[cut].Packets)
	}
	if lost := nports*per - got; lost != want[cut]*per {
		t.Errorf("blackhole: %d datagrams lost, %d flows (x%d) hash onto spine %d", lost, want[cut], per, cut)
	}
	for s := range f.Spines {
		if s != cut && delta[s].ToLeaf[1] == 0 {
			t.Errorf("blackhole: spine %d carried nothing", s)
		}
	}
	for _, p := range ports[:8] {
		if s, _ := f.SpineOf(a, b.IPv4, "udp", p, dport); s != spineOf[p] {
			t.Errorf("blackhole changed the hash of port %d: spine %d, was %d", p, s, spineOf[p])
		}
	}

	// Restore, then take the links down instead: the leaves rehash and
	// everything arrives over the three others.
	if err := f.RestoreSpine(cut); err != nil {
		t.Fatal(err)
	}
	if got := total(portsFlow(t, a, b, false, ports, dport, per)); got != nports*per {
		t.Errorf("restored: %d of %d arrived", got, nports*per)
	}
	_, before = countDelta(t, f, before)
	if err := f.CutSpine(cut, LinkDown); err != nil {
		t.Fatal(err)
	}
	got = total(portsFlow(t, a, b, false, ports, dport, per))
	delta, before = countDelta(t, f, before)
	if delta[cut].Packets != 0 {
		t.Errorf("spine with links down forwarded %d packets", delta[cut].Packets)
	}
	if got != nports*per {
		t.Errorf("links down: %d of %d arrived; the leaves should have rehashed", got, nports*per)
	}
	if err := f.RestoreSpine(cut); err != nil {
		t.Fatal(err)
	}
	got = total(portsFlow(t, a, b, false, ports, dport, per))
	delta, _ = countDelta(t, f, before)
	if got != nports*per || delta[cut].ToLeaf[1] != uint64(want[cut]*per) {
		t.Errorf("restored after links down: %d of %d arrived, spine %d carried %d (want %d)",
			got, nports*per, cut, delta[cut].ToLeaf[1], want[cut]*per)
	}
}

// total sums portsFlow's counts.
func total(m map[uint16]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}
