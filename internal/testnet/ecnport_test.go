package testnet

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ecnBurst sends count datagrams of size bytes back to back from host 0 to
// host 1 of s with the given ECN codepoint, and returns, per datagram
// index, the ECN field it arrived with (-1: lost).
func ecnBurst(t *testing.T, s *Star, ecn, count, size int) []int {
	t.Helper()
	from, to := s.Hosts[0], s.Hosts[1]
	rx, err := to.ListenUDP("udp4", netip.AddrPortFrom(to.IPv4, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := from.ListenUDP("udp4", netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := sockopt(rx, unix.IP_RECVTOS, 1); err != nil {
		t.Fatal(err)
	}
	if err := sockopt(rx, unix.SO_RCVBUF, 4<<20); err != nil {
		t.Fatal(err)
	}
	if err := sockopt(tx, unix.IP_TOS, ecn); err != nil {
		t.Fatal(err)
	}
	got := make([]int, count)
	for i := range got {
		got[i] = -1
	}
	done := make(chan error, 1)
	go func() {
		buf, oob := make([]byte, 65536), make([]byte, 256)
		for {
			_ = rx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, oobn, _, _, err := rx.ReadMsgUDP(buf, oob)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = nil // the burst is over
				}
				done <- err
				return
			}
			if n < 4 {
				continue
			}
			i := int(binary.BigEndian.Uint32(buf))
			tos, err := recvTOS(oob[:oobn])
			if err != nil {
				done <- err
				return
			}
			if i < count {
				got[i] = tos & 3
			}
		}
	}()
	dst := rx.LocalAddr().(*net.UDPAddr)
	msg := make([]byte, size)
	for i := range count {
		binary.BigEndian.PutUint32(msg, uint32(i))
		if _, err := tx.WriteToUDP(msg, dst); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}

func sockopt(c *net.UDPConn, opt, v int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	level := unix.IPPROTO_IP
	if opt == unix.SO_RCVBUF {
		level = unix.SOL_SOCKET
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, v) }); err != nil {
		return err
	}
	return serr
}

// recvTOS finds the IP_TOS control message IP_RECVTOS delivers.
func recvTOS(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) >= 1 {
			return int(m.Data[0]), nil
		}
	}
	return 0, errors.New("no IP_TOS control message")
}

// TestECNPortMarksRealPackets sends a burst through an ECN-marking port
// and reads each datagram's TOS byte at the receiver: the first ones,
// which find less than the threshold queued, arrive ECT(0); later ones
// arrive CE, exactly as many as the marker counted; what overflows the
// buffer is dropped by the marker, never by tbf; the qdisc's backlog,
// sampled, shows the queue. Then the same burst not ECN-capable arrives
// with no mark.
func TestECNPortMarksRealPackets(t *testing.T) {
	s := NewStar(t, 2, Config{StaticNeighbors: true})
	cfg := ECNPortConfig{RateBps: 10e6, ECNBytes: 10000, LimitBytes: 60000}
	p, err := s.Switch.SetECNPort(1, cfg)
	if errors.Is(err, unix.EPERM) || errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel refuses the tc program: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const count, size = 150, 1000
	const wire = size + 8 + 20 + 14 // what the marker counts per datagram
	if err := p.StartSampling(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	got := ecnBurst(t, s, 2 /* ECT(0) */, count, size)
	samples := p.StopSampling()
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	q, err := p.Qdisc()
	if err != nil {
		t.Fatal(err)
	}
	var ect, ceN, lost int
	firstCE := -1
	for i, e := range got {
		switch e {
		case -1:
			lost++
		case 2:
			ect++
		case 3:
			ceN++
			if firstCE < 0 {
				firstCE = i
			}
		default:
			t.Errorf("datagram %d arrived with ECN %d", i, e)
		}
	}
	t.Logf("%d ECT(0), %d CE (first at %d), %d lost; marker %+v; tbf %+v; %d backlog samples, max %d B",
		ect, ceN, firstCE, lost, c, q, len(samples), SampleQuantile(samples, 1))
	if ceN == 0 || ect == 0 || lost == 0 {
		t.Fatalf("want some datagrams unmarked, some CE and some dropped (a %d B burst into a %d B buffer)", count*wire, cfg.LimitBytes)
	}
	// Datagram i finds at most i*wire queued (less what drained), so none
	// before the threshold's worth can be marked.
	if min := cfg.ECNBytes / wire; firstCE < min {
		t.Errorf("first CE on datagram %d: it found at most %d B queued, not above %d", firstCE, firstCE*wire, cfg.ECNBytes)
	}
	if uint64(ceN) != c.Marked {
		t.Errorf("%d datagrams arrived CE, the marker marked %d", ceN, c.Marked)
	}
	if uint64(lost) != c.Dropped || q.Drops != 0 {
		t.Errorf("%d datagrams lost, the marker dropped %d, tbf %d: want the marker's drops only", lost, c.Dropped, q.Drops)
	}
	if c.PeakBytes > uint64(cfg.LimitBytes) || c.PeakBytes < uint64(cfg.LimitBytes-2*wire) {
		t.Errorf("peak virtual queue %d B, want just under the %d B buffer", c.PeakBytes, cfg.LimitBytes)
	}
	if m := SampleQuantile(samples, 1); m <= cfg.ECNBytes || m > cfg.LimitBytes+cfg.Burst+wire {
		t.Errorf("largest sampled tbf backlog %d B, want above the %d B threshold and within the buffer", m, cfg.ECNBytes)
	}

	// Not ECN-capable: nothing marked, the marker counts what it could
	// not mark, and the drops are the same.
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the first burst's queue drains (60 KB at 10 Mb/s: 48 ms)
	got = ecnBurst(t, s, 0, count, size)
	if c, err = p.Counters(); err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if e > 0 {
			t.Fatalf("not-ECT datagram %d arrived with ECN %d", i, e)
		}
	}
	if c.Marked != 0 || c.NotECT == 0 || c.Dropped == 0 {
		t.Errorf("not-ECT burst: marker %+v, want nothing marked, some unmarkable, some dropped", c)
	}
}
