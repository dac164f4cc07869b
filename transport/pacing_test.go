package transport

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/wire"
)

// fixedRate is a controller with an open window and a fixed pacing rate,
// so a test sees the pacer alone.
type fixedRate struct {
	congestion.Controller
	rate uint64
}

func (f *fixedRate) Window() int        { return 1 << 30 }
func (f *fixedRate) PacingRate() uint64 { return f.rate }

// pacedReleases runs a 1 MiB WRITE from side 0 through a controller that
// paces at 1.2 Gb/s (a 1 KiB packet every ~7 us) for d, and returns how
// many first transmissions of data left at each instant they left, in
// order.
func pacedReleases(t *testing.T, burst Duration, d Time) []int {
	t.Helper()
	l := newTLink(t, Config{PacingBurst: burst, MTU: 1200}, 1<<20)
	l.connect()
	a := l.conns[0]
	a.snd.cc = &fixedRate{Controller: a.snd.cc, rate: 1.2e9}
	var at []Time
	var n []int
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		p, err := wire.Parse(pkt)
		if from != 0 || err != nil || p.Class != wire.ClassData {
			return false, 0
		}
		h := p.Data()
		if h.Opcode() == wire.OpProbe || h.Flags()&wire.FlagRetx != 0 {
			return false, 0
		}
		if len(at) == 0 || at[len(at)-1] != l.now {
			at, n = append(at, l.now), append(n, 0)
		}
		n[len(n)-1]++
		return false, 0
	}
	if err := a.PostWrite(&WorkRequest{WRID: 1, Local: make([]byte, 1<<20), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
		t.Fatal(err)
	}
	l.run(d, nil)
	return n
}

// TestPacerBursts: with PacingBurst 0 the pacer releases a packet per
// interval; with a burst of 100 us it releases the same rate in bursts of
// about 100 us of it (docs/spec.md §8.9.4), never a packet per engine
// iteration once it has held the connection back.
func TestPacerBursts(t *testing.T) {
	const d = Time(2 * time.Millisecond)
	// 1.2 Gb/s of 1200-byte IP packets: 2 ms carries about 240.
	sum := func(n []int) (s int) {
		for _, k := range n {
			s += k
		}
		return s
	}
	single := pacedReleases(t, 0, d)
	for i, k := range single {
		if k != 1 {
			t.Fatalf("no burst: release %d sent %d packets at once", i, k)
		}
	}
	burst := pacedReleases(t, 100*Duration(time.Microsecond), d)
	total, ref := sum(burst), sum(single)
	if total < ref-ref/10 || total > ref+ref/10+20 {
		t.Errorf("bursts sent %d packets in 2 ms, packet by packet %d: the rate must be the same", total, ref)
	}
	// 100 us at 1.2 Gb/s is about 12 packets of 1200 bytes. The first
	// release follows the handshake's, the last may be cut by the end.
	for i, k := range burst[1 : len(burst)-1] {
		if k < 10 {
			t.Errorf("release %d of %d sent %d packets: want bursts of about 12 (%v)", i+1, len(burst), k, burst)
			break
		}
	}
	if len(burst) > total/10+2 {
		t.Errorf("%d releases for %d packets", len(burst), total)
	}
}

// TestHostDelayWidensTheWindow: bytes waiting in the hosts (the smoothed
// host delay of the fabric samples) are in flight to the transport but
// hold no queue in the fabric, so the in-flight bound is the
// controller's window plus its rate times the host delay; with no host
// delay (the simulator) it is the window.
func TestHostDelayWidensTheWindow(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	s := &l.conns[0].snd
	w, rate := s.cc.Window(), s.cc.PacingRate()
	if rate == 0 {
		t.Fatal("metaroce does not pace")
	}
	s.fabric.host = 0
	if got := s.ccWindow(); got != w {
		t.Errorf("no host delay: in-flight bound %d, window %d", got, w)
	}
	s.fabric.host = 300 * Duration(time.Microsecond)
	want := w + int(float64(rate)/8*300e-6)
	if got := s.ccWindow(); got < want-1 || got > want+1 {
		t.Errorf("300 us of host delay: in-flight bound %d, want window %d + %d", got, w, want-w)
	}
}
