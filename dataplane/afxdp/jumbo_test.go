package afxdp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/internal/testnet"
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		mtu                   int
		is6                   bool
		frame, spanFrames     uint32
		sg                    bool
		maxPayload, rxScratch int
	}{
		{1500, false, 2048, 0, false, 1472, 1518},
		{1500, true, 2048, 0, false, 1452, 1518},
		{3000, false, 4096, 0, false, 2972, 3018},
		{3500, true, 4096, 0, false, 3452, 3518},
		{4200, false, 4096, 2, true, 4172, 4218},
		{9000, false, 4096, 3, true, 8972, 9018},
		{9000, true, 4096, 3, true, 8952, 9018},
		{9216, true, 4096, 3, true, 9168, 9234},
	} {
		c, z, err := plan(tc.mtu, tc.is6, xsk.Config{})
		if err != nil {
			t.Fatalf("mtu %d: %v", tc.mtu, err)
		}
		if c.FrameSize != tc.frame || c.SpanFrames != tc.spanFrames || c.SG != tc.sg ||
			z.maxPayload != tc.maxPayload || z.rxFrame != tc.rxScratch {
			t.Errorf("mtu %d v6 %v: frame %d spans of %d sg %v payload %d scratch %d", tc.mtu, tc.is6,
				c.FrameSize, c.SpanFrames, c.SG, z.maxPayload, z.rxFrame)
		}
		if c.SpanFrames > 0 && (c.TxSpans != 2048/c.SpanFrames || int(c.SpanFrames*c.FrameSize) < headroom+z.maxPayload) {
			t.Errorf("mtu %d: %d spans of %d frames for %d-byte buffers", tc.mtu, c.TxSpans, c.SpanFrames, headroom+z.maxPayload)
		}
	}
	c, _, _ := plan(9000, false, xsk.Config{FrameSize: 2048})
	if c.SpanFrames != 5 || !c.SG {
		t.Errorf("mtu 9000 over 2048-byte frames: spans of %d, sg %v", c.SpanFrames, c.SG)
	}
	for _, bad := range []int{575, 9217} {
		if _, _, err := plan(bad, false, xsk.Config{}); err == nil {
			t.Errorf("mtu %d accepted", bad)
		}
	}
}

// TestJumboLinkNoAllocs drives two links directly (no engine) at MTU 9000
// and, for the single-buffer path, 1500: full-size packets (at 9000 out
// of TX spans as chains, gathered on the other side into scratch buffers),
// checked at the receiver; the steady state allocates nothing.
func TestJumboLinkNoAllocs(t *testing.T) {
	for _, mtu := range []int{9000, 1500} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) { linkNoAllocs(t, mtu) })
	}
}

func linkNoAllocs(t *testing.T, mtu int) {
	p := testnet.NewPair(t, testnet.Config{Link: testnet.LinkConfig{MTU: mtu}})
	open := func(h *testnet.Host) *Iface {
		var fi *Iface
		if err := h.Do(func() (err error) {
			fi, err = OpenIface(IfaceConfig{Name: h.Port.Name, Port: 4792, Mode: bpf.ModeNative, MTU: mtu})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fi.Close() })
		return fi
	}
	fa, fb := open(p.A), open(p.B)
	jumbo := mtu > SingleBufferMTU
	if fa.Program.Frags() != jumbo || fa.Links[0].Socket().Info().SG != jumbo {
		t.Fatalf("mtu %d: frags program %v, sg socket %v", mtu, fa.Program.Frags(), fa.Links[0].Socket().Info().SG)
	}
	a, b := fa.Links[0], fb.Links[0]
	if a.MaxPayload() != mtu-28 {
		t.Fatalf("MaxPayload %d, want %d", a.MaxPayload(), mtu-28)
	}
	dst := fb.Local
	deadline := time.Now().Add(5 * time.Second)
	for _, ok := fa.Resolver.Lookup(dst); !ok; _, ok = fa.Resolver.Lookup(dst) {
		if time.Now().After(deadline) {
			t.Fatal("neighbour never resolved")
		}
		time.Sleep(5 * time.Millisecond)
	}
	const burst = 8
	tx := make([]dataplane.TxPacket, burst)
	rx := make([]dataplane.RxPacket, 64)
	sent, got, bad := 0, 0, 0
	var seq byte
	round := func() {
		k := a.ReserveTx(tx)
		for i := range tx[:k] {
			b := tx[i].Buf[:a.MaxPayload()]
			b[0] = 1 // the MetaRoCE version, or XDP drops it
			for j := 1; j < len(b); j += 97 {
				b[j] = seq
			}
			b[len(b)-1] = seq
			seq++
			tx[i].Len, tx[i].Dst, tx[i].SrcPort = len(b), dst, 50000
		}
		if err := a.SubmitTx(tx[:k]); err != nil {
			panic(err)
		}
		sent += k
		for spin := 0; spin < 1000 && got < sent; spin++ {
			n := b.Receive(rx)
			for _, r := range rx[:n] {
				if len(r.Payload) != a.MaxPayload() || r.Payload[0] != 1 || r.Payload[98] != r.Payload[len(r.Payload)-1] || r.Payload[1+97*((len(r.Payload)-2)/97)] != r.Payload[len(r.Payload)-1] {
					bad++
				}
			}
			got += n
			b.Release(rx[:n])
		}
	}
	for i := 0; i < 20; i++ {
		round() // warm up: first sends, ring indices, neighbour table
	}
	allocs := testing.AllocsPerRun(200, round)
	if allocs != 0 {
		t.Errorf("%v allocs per round of %d jumbo packets", allocs, burst)
	}
	if jumbo != (b.Stats.RxChained > 0) || jumbo && b.Stats.RxChained < uint64(got) {
		t.Errorf("mtu %d: %d of %d received were gathered from chains", mtu, b.Stats.RxChained, got)
	}
	if bad != 0 || got < sent*9/10 {
		t.Fatalf("sent %d, received %d (%d gathered from chains), %d wrong", sent, got, b.Stats.RxChained, bad)
	}
	t.Logf("sent %d, received %d, gathered %d; B multi-buffer drops %d", sent, got, b.Stats.RxChained, b.Stats.RxMultiBuffer)
}

// TestOpenIfaceMTUAbove: OpenIface refuses an MTU above the interface's,
// naming the interface and both MTUs; 0 takes the interface's own.
func TestOpenIfaceMTUAbove(t *testing.T) {
	p := testnet.NewPair(t, testnet.Config{Link: testnet.LinkConfig{MTU: 4200}})
	err := p.A.Do(func() error {
		fi, err := OpenIface(IfaceConfig{Name: p.A.Port.Name, Port: 4792, MTU: 9000})
		if err == nil {
			fi.Close()
			t.Error("mtu 9000 on a 4200-byte interface accepted")
			return nil
		}
		for _, want := range []string{p.A.Port.Name, "4200", "9000"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
		fi, err = OpenIface(IfaceConfig{Name: p.A.Port.Name, Port: 4792})
		if err != nil {
			return err
		}
		defer fi.Close()
		if got := fi.Links[0].MaxPayload(); got != 4200-28 {
			t.Errorf("MTU 0 on a 4200-byte interface: MaxPayload %d, want %d", got, 4200-28)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
