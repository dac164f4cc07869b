package udplink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/dataplane"
)

// sprayBatch reserves, writes and submits packets seq..seq+n-1 to dst, packet
// seq+i from source port port(i).
func sprayBatch(tb testing.TB, l *Link, dst netip.Addr, seq uint32, n, size int, port func(i int) uint16) {
	tb.Helper()
	batch := make([]dataplane.TxPacket, n)
	if got := l.ReserveTx(batch); got != n {
		tb.Fatalf("ReserveTx = %d, want %d", got, n)
	}
	for i := range batch {
		p := &batch[i]
		p.Len = size
		fill(p.Buf[:p.Len], seq+uint32(i))
		p.Dst, p.SrcPort = dst, port(i)
	}
	if err := l.SubmitTx(batch); err != nil {
		tb.Fatal(err)
	}
}

// recvPorts receives n packets and returns, for each, its sequence number
// (its first 4 bytes, after checking every byte against fill) and the UDP
// source port it came from.
func recvPorts(tb testing.TB, l *Link, n, size int) map[uint32]uint16 {
	tb.Helper()
	out := map[uint32]uint16{}
	batch := make([]dataplane.RxPacket, 64)
	for idle := 0; len(out) < n; {
		k := l.Receive(batch)
		if k == 0 {
			if idle++; idle > 50 {
				tb.Fatalf("received %d packets, want %d", len(out), n)
			}
			if err := l.Poll(100 * time.Millisecond); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		idle = 0
		for _, p := range batch[:k] {
			seq := binary.BigEndian.Uint32(p.Payload)
			if !bytes.Equal(p.Payload, want(seq, size)) {
				tb.Fatalf("packet %d: payload differs from what was sent", seq)
			}
			if _, dup := out[seq]; dup {
				tb.Fatalf("packet %d received twice", seq)
			}
			out[seq] = p.SrcPort
		}
		l.Release(batch[:k])
	}
	return out
}

// TestSrcPortsSpray: a link with a pool of 8 source ports sends each packet
// from the port its SrcPort names, interleaved as the transport sprays
// them (packet i on port lo + i%8), and the receiver reports that port as
// RxPacket.SrcPort. The batch costs one sendmmsg per socket, and with GSO
// each socket's 8 packets still go down as one run although no two
// consecutive packets of the batch share a socket.
func TestSrcPortsSpray(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run("gso="+onOff(gso), func(t *testing.T) {
			ls := openLinks(t, Config{Local: lo1, SrcPorts: 8, GSO: gso}, Config{Local: lo2, GSO: gso})
			a, b := ls[0], ls[1]
			lo, hi, ok := a.SrcPortRange()
			if !ok || hi-lo != 7 {
				t.Fatalf("SrcPortRange = %d..%d %v, want 8 ports", lo, hi, ok)
			}
			const size = 1000
			c0 := a.Counters()
			sprayBatch(t, a, lo2, 0, 64, size, func(i int) uint16 { return lo + uint16(i%8) })
			c := a.Counters()
			if d := c.SendCalls - c0.SendCalls; d != 8 {
				t.Errorf("64 packets over 8 sockets took %d sendmmsg calls, want 8", d)
			}
			if gsoOn, _ := a.Offloads(); gsoOn {
				if d := c.SentGSO - c0.SentGSO; d != 8 {
					t.Errorf("%d GSO runs, want 8 (one per socket)", d)
				}
			}
			got := recvPorts(t, b, 64, size)
			for seq, port := range got {
				if w := lo + uint16(seq%8); port != w {
					t.Errorf("packet %d from port %d, want %d", seq, port, w)
				}
			}
		})
	}
}

// TestSrcPortsOutOfRange: an entropy value outside the pool (an ack echoing
// a peer that uses another range) goes out of the pool socket (port-lo) mod
// n, the same one every time.
func TestSrcPortsOutOfRange(t *testing.T) {
	ls := openLinks(t, Config{Local: lo1, SrcPorts: 4}, Config{Local: lo2})
	a, b := ls[0], ls[1]
	lo, _, _ := a.SrcPortRange()
	ports := []uint16{0, 1, lo - 1, lo + 4, lo + 5, 65535, lo + 2}
	for round := range 2 {
		sprayBatch(t, a, lo2, uint32(round*len(ports)), len(ports), 100, func(i int) uint16 { return ports[i] })
	}
	got := recvPorts(t, b, 2*len(ports), 100)
	for seq, port := range got {
		asked := ports[int(seq)%len(ports)]
		if w := lo + (asked-lo)%4; port != w {
			t.Errorf("SrcPort %d went out from %d, want %d", asked, port, w)
		}
	}
}

// TestSrcPortsReceiveNothing: datagrams sent to the pool's ports are
// dropped by the send sockets' filter (nothing queues on them, so there is
// nothing to drain), and never reach the link; one sent to the link's port
// does, and its source port is reported.
func TestSrcPortsReceiveNothing(t *testing.T) {
	l := openLinks(t, Config{Local: lo1, SrcPorts: 4, GSO: true})[0]
	lo, hi, _ := l.SrcPortRange()
	peer := plainSocket(t, lo2, uint16(20000+rand.IntN(40000)))
	for port := lo; port <= hi; port++ {
		sendTOS(t, peer, netip.AddrPortFrom(lo1, port), []byte("stray"), 0)
	}
	sendTOS(t, peer, l.LocalAddr(), []byte("to the link"), 0)
	got := recvN(t, l, 1, 8)
	if string(got[0].payload) != "to the link" {
		t.Fatalf("link received %q", got[0].payload)
	}
	if k := l.Receive(make([]dataplane.RxPacket, 8)); k != 0 {
		t.Fatalf("link received %d more packets", k)
	}
	buf := make([]byte, 64)
	for i, fd := range l.src.fds {
		if n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); !errors.Is(err, unix.EAGAIN) {
			t.Errorf("send socket of port %d: recv %d bytes, %v; want EAGAIN", int(lo)+i, n, err)
		}
	}
}

// TestSrcPortsReportPort: without a pool, received packets still carry the
// sender's source port.
func TestSrcPortsReportPort(t *testing.T) {
	l := openLinks(t, Config{Local: lo1})[0]
	port := uint16(20000 + rand.IntN(40000))
	peer := plainSocket(t, lo2, port)
	sendTOS(t, peer, l.LocalAddr(), []byte("x"), 0)
	batch := make([]dataplane.RxPacket, 1)
	for l.Receive(batch) == 0 {
		if err := l.Poll(time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if batch[0].SrcPort != port {
		t.Fatalf("SrcPort %d, want %d", batch[0].SrcPort, port)
	}
	l.Release(batch)
}

// TestSrcPortsSlide: Open slides the pool past a port in use, fails naming
// the range when no window fits, and takes the link's own port into the
// pool as the main socket rather than binding it twice.
func TestSrcPortsSlide(t *testing.T) {
	base := uint16(20000 + rand.IntN(40000))
	busy := plainSocket(t, lo1, base+3)
	_ = busy
	ls := openLinks(t, Config{Local: lo1, SrcPorts: 4, SrcPortMin: base, SrcPortMax: base + 20})
	if lo, hi, _ := ls[0].SrcPortRange(); lo != base+4 || hi != base+7 {
		t.Errorf("pool %d..%d, want %d..%d (past the busy %d)", lo, hi, base+4, base+7, base+3)
	}
	ls[0].Close()

	_, err := Open(Config{Local: lo1, Port: base + 40, SrcPorts: 4, SrcPortMin: base, SrcPortMax: base + 5})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d..%d", base, base+5)) {
		t.Errorf("no room: %v", err)
	}

	l, err := Open(Config{Local: lo1, Port: base + 10, SrcPorts: 4, SrcPortMin: base + 9, SrcPortMax: base + 12})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.src.main != 1 || l.src.fds[1] != l.fd {
		t.Errorf("the link's port in the pool: main %d, fds %v, fd %d", l.src.main, l.src.fds, l.fd)
	}
	if !strings.Contains(l.Info().Why, fmt.Sprintf("source ports %d..%d", base+9, base+12)) {
		t.Errorf("Why: %s", l.Info().Why)
	}
}

// TestSrcPortsClose: Close closes every send socket, so the ports bind
// again.
func TestSrcPortsClose(t *testing.T) {
	l := openLinks(t, Config{Local: lo1, SrcPorts: 8})[0]
	lo, hi, _ := l.SrcPortRange()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for port := lo; port <= hi; port++ {
		plainSocket(t, lo1, port) // fails the test if the port is still bound
	}
}

// TestSrcPortsIPv6: the pool works on an IPv6 link (sending to itself over
// ::1).
func TestSrcPortsIPv6(t *testing.T) {
	l := openLinks(t, Config{Local: lo6, SrcPorts: 4, GSO: true})[0]
	lo, _, _ := l.SrcPortRange()
	sprayBatch(t, l, lo6, 0, 16, 500, func(i int) uint16 { return lo + uint16(i%4) })
	for seq, port := range recvPorts(t, l, 16, 500) {
		if w := lo + uint16(seq%4); port != w {
			t.Errorf("packet %d from port %d, want %d", seq, port, w)
		}
	}
}

func TestSrcPortsConfig(t *testing.T) {
	c, err := Config{Local: lo1}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.SrcPorts != 0 || c.SrcPortMin != 49152 || c.SrcPortMax != 65535 {
		t.Fatalf("defaults %+v", c)
	}
	for _, bad := range []Config{
		{Local: lo1, SrcPorts: -1},
		{Local: lo1, SrcPorts: maxSrcPorts + 1},
		{Local: lo1, SrcPorts: 4, SrcPortMin: 100, SrcPortMax: 102},
		{Local: lo1, SrcPortMin: 200, SrcPortMax: 100},
		{Local: lo1, SrcPortMax: 100},
	} {
		if _, err := bad.resolve(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestSendRefusedSprayed: a packet the kernel refuses (EACCES, broadcast)
// costs only itself when the batch is spread over sockets too: each
// socket's group sends the rest, with GSO runs retried packet by packet.
func TestSendRefusedSprayed(t *testing.T) {
	bcast := netip.MustParseAddr("127.255.255.255")
	for _, gso := range []bool{false, true} {
		t.Run(onOff(gso), func(t *testing.T) {
			ls := openLinks(t, Config{Local: lo1, GSO: gso, SrcPorts: 3}, Config{Local: lo2})
			a, b := ls[0], ls[1]
			lo, _, _ := a.SrcPortRange()
			batch := make([]dataplane.TxPacket, 12)
			a.ReserveTx(batch)
			for i := range batch {
				batch[i].Dst, batch[i].Len, batch[i].SrcPort = lo2, 100, lo+uint16(i%3)
				if i/3 == 1 {
					batch[i].Dst = bcast // one packet of each socket
				}
				fill(batch[i].Buf[:100], uint32(i))
			}
			if err := a.SubmitTx(batch); err != nil {
				t.Fatal(err)
			}
			if c := a.Counters(); c.Sent != 9 || c.SendErrors != 3 {
				t.Fatalf("counters %+v, want 9 sent, 3 errors", c)
			}
			got := recvPorts(t, b, 9, 100)
			for seq, port := range got {
				if seq/3 == 1 || port != lo+uint16(seq%3) {
					t.Errorf("packet %d from port %d", seq, port)
				}
			}
		})
	}
}
