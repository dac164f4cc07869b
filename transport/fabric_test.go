package transport_test

import (
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// hostLink is a scenario in which each host's link stamps a packet's
// arrival (as the XDP program does) and its engine takes the packet
// hostWait later, behind a busy or descheduled engine; the fabric takes
// oneWay each direction.
type hostLink struct {
	t            *testing.T
	a, b         *transport.Endpoint
	addrA, addrB netip.Addr
	oneWay       transport.Time
	waitA, waitB transport.Time // engine receive delay at each host
	q            []inflight
	now          transport.Time
	maxOver      time.Duration // AckDelay beyond the receiver's real hold (never positive)
	acks         int
	minAckDelay  time.Duration
}

type inflight struct {
	to           *transport.Endpoint
	from         netip.Addr
	arrival, got transport.Time // at the link; taken by the engine
	pkt          []byte
}

func (h *hostLink) flush(e *transport.Endpoint) {
	buf := make([]byte, 2048)
	for e.HasOutput() {
		d, ok := e.Transmit(h.now, buf)
		if !ok {
			return
		}
		pkt := append([]byte(nil), buf[:d.Len]...)
		to, from, wait := h.b, h.addrA, h.waitB
		if e == h.b {
			to, from, wait = h.a, h.addrB, h.waitA
		}
		arr := h.now + h.oneWay
		h.q = append(h.q, inflight{to: to, from: from, arrival: arr, got: arr + wait, pkt: pkt})
	}
}

// run advances time to until, delivering packets and firing timers.
func (h *hostLink) run(until transport.Time) {
	for h.now < until {
		next := min(h.a.NextTimeout(), h.b.NextTimeout(), until)
		sort.SliceStable(h.q, func(i, j int) bool { return h.q[i].got < h.q[j].got })
		if len(h.q) > 0 && h.q[0].got < next {
			p := h.q[0]
			h.q = h.q[1:]
			h.now = max(h.now, p.got)
			if pk, err := wire.Parse(p.pkt); err == nil && pk.Class == wire.ClassAck && p.to == h.a {
				h.acks++
				ad := time.Duration(pk.Ack().AckDelay())
				if h.acks == 1 || ad < h.minAckDelay {
					h.minAckDelay = ad
				}
				// The ack left its host at arrival - oneWay; the data it
				// speaks for arrived there at least AckDelay before.
			}
			p.to.ReceiveAt(h.now, p.arrival, p.from, 50000, false, p.pkt)
		} else {
			h.now = max(h.now, next)
			if h.a.NextTimeout() <= h.now {
				h.a.Timeout(h.now)
			}
			if h.b.NextTimeout() <= h.now {
				h.b.Timeout(h.now)
			}
		}
		h.flush(h.a)
		h.flush(h.b)
	}
}

// TestFabricRTTLeavesHostDelayOut: with 300 us of receive delay at the
// receiving host and 200 us at the sender, over a fabric of 20 us each way,
// the congestion controller's samples are the fabric's 40 us (the
// receiver measures AckDelay from its link's arrival stamp, the sender
// takes the ack's arrival from its own), while the recovery RTT, which
// the retransmission timer rests on, keeps the host delay: an ack can be
// that late again.
func TestFabricRTTLeavesHostDelayOut(t *testing.T) {
	h := &hostLink{t: t, addrA: netip.MustParseAddr("10.0.0.1"), addrB: netip.MustParseAddr("10.0.0.2"),
		oneWay: transport.Time(20 * time.Microsecond), waitA: transport.Time(200 * time.Microsecond),
		waitB: transport.Time(300 * time.Microsecond), now: 1}
	cfg := transport.Config{Seed: 1, Congestion: "metaroce"}
	var err error
	if h.a, err = transport.NewEndpoint(cfg, h.addrA); err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 2
	h.b, _ = transport.NewEndpoint(cfg, h.addrB)
	const key = 0x5eed
	region := make([]byte, 1<<20)
	mem := transport.NewMemoryTable()
	mem.Add(&transport.Region{Key: key, Addr: 1 << 32, Buf: region, Access: transport.AccessRemoteWrite})
	h.b.Listen(1, mem)
	c, err := h.a.Connect(h.now, h.addrB, 1, transport.NewMemoryTable())
	if err != nil {
		t.Fatal(err)
	}
	h.flush(h.a)
	h.run(transport.Time(20 * time.Millisecond))
	if c.State() != transport.StateEstablished {
		t.Fatalf("not established: %v", c.State())
	}
	src := make([]byte, 64<<10)
	for i := range 20 {
		if err := c.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: src, RemoteAddr: 1 << 32, RKey: key}); err != nil {
			t.Fatal(err)
		}
		h.flush(h.a)
		h.run(h.now + transport.Time(5*time.Millisecond))
	}
	st := c.Stats()
	es := h.a.Stats()
	t.Logf("fabric %v (min %v), host delay %v, recovery srtt %v (min %v), %d acks, smallest AckDelay %v, %d retransmitted (%d tail probes, %d timeouts)",
		st.FabricRTT, st.FabricMinRTT, st.HostDelay, st.SRTT, st.MinRTT, h.acks, h.minAckDelay, st.Retransmitted, es.TailProbes, es.Timeouts)
	if st.FabricMinRTT < 40*time.Microsecond || st.FabricMinRTT > 45*time.Microsecond {
		t.Errorf("fabric minimum RTT %v, want the fabric's 40 us", st.FabricMinRTT)
	}
	if h.minAckDelay < 300*time.Microsecond {
		t.Errorf("an AckDelay of %v: the receiver held every packet 300 us after its link's arrival stamp", h.minAckDelay)
	}
	if st.MinRTT < 500*time.Microsecond {
		t.Errorf("recovery minimum RTT %v leaves out host delay the timer must wait for (>= 500 us)", st.MinRTT)
	}
	if st.HostDelay < 450*time.Microsecond {
		t.Errorf("host delay %v, want about 500 us", st.HostDelay)
	}
	// Tail probes resend a message's last packet when its ack is late
	// against 2 SRTT; none may be a timeout's (the RTO covers host delay).
	if es.Timeouts != 0 || st.Retransmitted > es.TailProbes {
		t.Errorf("%d retransmissions, %d timeouts on a lossless link", st.Retransmitted, es.Timeouts)
	}
}
