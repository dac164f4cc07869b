package afxdp

import (
	"context"
	"testing"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/transport"
)

// runPair runs a generator from A to B over AF_XDP on a testnet topology
// and returns what both ends saw.
func runPair(t *testing.T, a, b *testnet.Host, v6 bool, messages int) (dataplane.GenResult, dataplane.TargetStats, transport.Stats) {
	t.Helper()
	open := func(h *testnet.Host) *Iface {
		var fi *Iface
		err := h.Do(func() error {
			var err error
			fi, err = OpenIface(IfaceConfig{Name: h.Port.Name, IPv6: v6, Port: 4792, Mode: bpf.ModeAuto,
				DSCPData: 26, DSCPControl: 48})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fi.Close() })
		return fi
	}
	fa, fb := open(a), open(b)
	if fa.Attachment.Mode != bpf.ModeNative {
		t.Errorf("veth attach mode %v, want native", fa.Attachment.Mode)
	}
	epA, err := transport.NewEndpoint(transport.Config{}, fa.Local)
	if err != nil {
		t.Fatal(err)
	}
	epB, _ := transport.NewEndpoint(transport.Config{}, fb.Local)
	gc := dataplane.GenConfig{Size: 65536, Slots: 16, Seed: 9, Peer: fb.Local, Messages: messages, Streams: 4}
	w, err := dataplane.NewWriter(gc)
	if err != nil {
		t.Fatal(err)
	}
	tgt := dataplane.NewTarget(gc, epB)
	ea := dataplane.NewEngine(dataplane.EngineConfig{}, fa.Links[0], epA, w)
	eb := dataplane.NewEngine(dataplane.EngineConfig{}, fb.Links[0], epB, tgt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { ea.Run(ctx); done <- struct{}{} }()
	go func() { eb.Run(ctx); done <- struct{}{} }()
	var res dataplane.GenResult
	select {
	case res = <-w.Done():
	case <-time.After(120 * time.Second):
		t.Error("generator did not finish in 120s")
	}
	var st dataplane.TargetStats
	eb.Do(context.Background(), func(transport.Time) { st = tgt.Stats() })
	for i := 0; i < 1000 && st.Verified < messages; i++ {
		time.Sleep(2 * time.Millisecond)
		eb.Do(context.Background(), func(transport.Time) { st = tgt.Stats() })
	}
	var sa transport.Stats
	ea.Do(context.Background(), func(transport.Time) { sa = *epA.Stats() })
	cancel()
	<-done
	<-done
	return res, st, sa
}

func TestAFXDPPair(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := map[bool]string{false: "ipv4", true: "ipv6"}[v6]
		t.Run(name, func(t *testing.T) {
			p := testnet.NewPair(t, testnet.Config{})
			res, st, _ := runPair(t, p.A, p.B, v6, 512)
			if res.Err != "" || res.Completed != 512 || st.Verified != 512 || st.Corrupt != 0 || st.Duplicates != 0 {
				t.Fatalf("writer %+v target %+v", res, st)
			}
			t.Logf("%s: %.2f Gb/s over %v", name, res.Gbps, res.Elapsed)
		})
	}
}

// TestAFXDPThroughLossySwitch is the acceptance run of the dataplane: two
// hosts through a switch namespace that drops 1% of packets at random,
// 256 MiB of WRITEs, every byte verified, nothing lost; IPv4 then IPv6.
func TestAFXDPThroughLossySwitch(t *testing.T) {
	const messages = 256 << 20 / 65536
	for _, v6 := range []bool{false, true} {
		name := map[bool]string{false: "ipv4", true: "ipv6"}[v6]
		t.Run(name, func(t *testing.T) {
			s := testnet.NewStar(t, 2, testnet.Config{})
			if err := s.Switch.SetLoss(0.01); err != nil {
				t.Fatal(err)
			}
			res, st, sa := runPair(t, s.Hosts[0], s.Hosts[1], v6, messages)
			dropped, _ := s.Switch.Dropped()
			if res.Err != "" || res.Completed != messages || res.Failed != 0 {
				t.Fatalf("writer %+v", res)
			}
			if st.Verified != messages || st.Corrupt != 0 || st.Duplicates != 0 || st.Bytes != 256<<20 {
				t.Fatalf("target %+v", st)
			}
			if dropped == 0 || sa.DataRetransmitted == 0 {
				t.Errorf("switch dropped %d, sender retransmitted %d: the loss did not happen", dropped, sa.DataRetransmitted)
			}
			t.Logf("%s: %.2f Gb/s, switch dropped %d, retransmitted %d of %d, timeouts %d",
				name, res.Gbps, dropped, sa.DataRetransmitted, sa.DataSent, sa.Timeouts)
		})
	}
}
