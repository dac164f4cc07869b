package afxdp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/internal/gentest"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// runPair runs a writer from A to a target on B over AF_XDP on a testnet topology
// and returns what both ends saw.
type pairRun struct {
	res               gentest.Result
	target            gentest.TargetStats
	sa, sb            transport.Stats
	xdpB              bpf.Counters
	linkA, linkB      Stats
	spansA, spansCapA int // A's TX spans free and in all, at the end
	statsB            xsk.Stats
}

func runPair(t *testing.T, a, b *testnet.Host, v6 bool, messages int) (gentest.Result, gentest.TargetStats, transport.Stats) {
	r := runPairWith(t, a, b, v6, 0, messages, nil)
	return r.res, r.target, r.sa
}

// runPairWith is runPair at an MTU (0: 1500) with inject running during
// the transfer, on a goroutine, until the transfer ends.
func runPairWith(t *testing.T, a, b *testnet.Host, v6 bool, mtu, messages int, inject func(ctx context.Context, dst netip.Addr)) pairRun {
	t.Helper()
	open := func(h *testnet.Host) *Iface {
		var fi *Iface
		err := h.Do(func() error {
			var err error
			fi, err = OpenIface(IfaceConfig{Name: h.Port.Name, IPv6: v6, Port: 4792, Mode: bpf.ModeAuto, MTU: mtu,
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
	cfg := transport.Config{MTU: mtu, Congestion: transport.CongestionNone} // the send window alone: the test is about the link
	epA, err := transport.NewEndpoint(cfg, fa.Local)
	if err != nil {
		t.Fatal(err)
	}
	epB, _ := transport.NewEndpoint(cfg, fb.Local)
	gc := gentest.Config{Size: 65536, Slots: 16, Seed: 9, Peer: fb.Local, Messages: messages, Streams: 4}
	w, err := gentest.NewWriter(gc)
	if err != nil {
		t.Fatal(err)
	}
	tgt := gentest.NewTarget(gc, epB)
	ea := dataplane.NewEngine(dataplane.EngineConfig{}, fa.Links[0], epA, w)
	eb := dataplane.NewEngine(dataplane.EngineConfig{}, fb.Links[0], epB, tgt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { ea.Run(ctx); done <- struct{}{} }()
	go func() { eb.Run(ctx); done <- struct{}{} }()
	injected := make(chan struct{})
	if inject != nil {
		go func() { inject(ctx, fb.Local); close(injected) }()
	} else {
		close(injected)
	}
	var res gentest.Result
	select {
	case res = <-w.Done():
	case <-time.After(120 * time.Second):
		t.Error("writer did not finish in 120s")
	}
	var st gentest.TargetStats
	eb.Do(context.Background(), func(transport.Time) { st = tgt.Stats() })
	for i := 0; i < 1000 && st.Verified < messages; i++ {
		time.Sleep(2 * time.Millisecond)
		eb.Do(context.Background(), func(transport.Time) { st = tgt.Stats() })
	}
	var r pairRun
	ea.Do(context.Background(), func(transport.Time) { r.sa = *epA.Stats() })
	cancel()
	<-injected
	<-done
	<-done
	r.res, r.target = res, st
	r.sb = *epB.Stats()
	r.linkA, r.linkB = fa.Links[0].Stats, fb.Links[0].Stats
	// The engines have stopped: the test owns the sockets now. Spans of
	// packets the kernel still held come back through the completion ring.
	sa := fa.Links[0].Socket()
	for i := 0; i < 200 && sa.SpansFree() < sa.SpansCap(); i++ {
		sa.Complete()
		time.Sleep(time.Millisecond)
	}
	r.spansA, r.spansCapA = sa.SpansFree(), sa.SpansCap()
	r.statsB, _ = fb.Links[0].Socket().Stats()
	r.xdpB, _ = fb.Program.Counters()
	return r
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

// TestAFXDPJumbo: a real transfer through two engines over AF_XDP on veth
// at MTU 9000 (three-buffer frames) and 4200 (a 4 KiB payload, two-buffer
// frames), both families, every byte verified by the target. The packets
// must have gone as chains (the receiver gathered them), none dropped as
// multi-buffer, and every TX span must come back.
func TestAFXDPJumbo(t *testing.T) {
	for _, mtu := range []int{9000, 4200} {
		for _, v6 := range []bool{false, true} {
			name := fmt.Sprintf("mtu%d/%s", mtu, map[bool]string{false: "ipv4", true: "ipv6"}[v6])
			t.Run(name, func(t *testing.T) {
				p := testnet.NewPair(t, testnet.Config{Link: testnet.LinkConfig{MTU: mtu}})
				const messages = 256
				r := runPairWith(t, p.A, p.B, v6, mtu, messages, nil)
				if r.res.Err != "" || r.res.Completed != messages || r.target.Verified != messages ||
					r.target.Corrupt != 0 || r.target.Duplicates != 0 || r.target.Bytes != messages*65536 {
					t.Fatalf("writer %+v target %+v", r.res, r.target)
				}
				maxPayload := mtu - 48 - wire.DataLen - wire.TrailerLen
				if want := uint64(messages * (65536 / maxPayload)); r.linkB.RxChained < want {
					t.Errorf("receiver gathered %d chains, want at least %d (one per full data packet)", r.linkB.RxChained, want)
				}
				if r.linkB.RxMultiBuffer != 0 || r.linkA.RxMultiBuffer != 0 {
					t.Errorf("multi-buffer drops: A %d, B %d", r.linkA.RxMultiBuffer, r.linkB.RxMultiBuffer)
				}
				if r.spansA != r.spansCapA {
					t.Errorf("%d of %d TX spans never came back", r.spansCapA-r.spansA, r.spansCapA)
				}
				t.Logf("retransmitted %d of %d; A no neighbour %d, ring full %d; B socket %+v", r.sa.DataRetransmitted, r.sa.DataSent,
					r.linkA.TxNoNeighbor, r.linkA.TxRingFull, r.statsB)
				t.Logf("%s: %.2f Gb/s over %v; B gathered %d chains; A spans %d/%d free at the end",
					name, r.res.Gbps, r.res.Elapsed, r.linkB.RxChained, r.spansA, r.spansCapA)
			})
		}
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
			t.Logf("%s: %.2f Gb/s, switch dropped %d, retransmitted %d of %d, timeouts %d, path timeouts %d, suspected %d, retired %d, spurious %d",
				name, res.Gbps, dropped, sa.DataRetransmitted, sa.DataSent, sa.Timeouts, sa.PathTimeouts, sa.PathsSuspected, sa.PathsRetired, sa.SpuriousRetx)
		})
	}
}

// TestAFXDPBadInput (issue 6): malformed, truncated, wrong-CRC,
// wrong-version and unknown-connection packets sent to the daemon's port
// during a transfer are counted and dropped where they are caught (in XDP
// or in the transport), and the transfer still completes byte-exact.
func TestAFXDPBadInput(t *testing.T) {
	p := testnet.NewPair(t, testnet.Config{})
	good := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpWrite, DstConn: 12345, PSN: 7, MsgLen: 8, RKey: 1}, make([]byte, 8))
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 1
	badVer := append([]byte(nil), good...)
	badVer[0] = 9
	kinds := [][]byte{good /* unknown connection */, badCRC, badVer, good[:20] /* truncated */, {1, 2, 3} /* short */}
	const rounds = 400
	inject := func(ctx context.Context, dst netip.Addr) {
		p.A.Do(func() error {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 4792)))
			if err != nil {
				t.Error(err)
				return nil
			}
			defer c.Close()
			for i := 0; i < rounds && ctx.Err() == nil; i++ {
				for _, k := range kinds {
					c.Write(k)
				}
				time.Sleep(50 * time.Microsecond)
			}
			return nil
		})
	}
	r := runPairWith(t, p.A, p.B, false, 0, 512, inject)
	if r.res.Err != "" || r.target.Verified != 512 || r.target.Corrupt != 0 || r.target.Duplicates != 0 {
		t.Fatalf("writer %+v target %+v", r.res, r.target)
	}
	if r.sb.RxUnknownConn == 0 || r.sb.RxMalformed[wire.ErrCRC.Reason()] == 0 || r.sb.RxMalformed[wire.ErrShort.Reason()] == 0 {
		t.Errorf("transport drops: unknown conn %d, crc %d, short %d", r.sb.RxUnknownConn,
			r.sb.RxMalformed[wire.ErrCRC.Reason()], r.sb.RxMalformed[wire.ErrShort.Reason()])
	}
	if r.xdpB.DroppedVersion == 0 || r.xdpB.DroppedShort == 0 {
		t.Errorf("XDP drops: version %d, short %d", r.xdpB.DroppedVersion, r.xdpB.DroppedShort)
	}
	t.Logf("transport: unknown conn %d crc %d short %d; xdp: version %d short %d; resets sent %d (rate-limited %d)",
		r.sb.RxUnknownConn, r.sb.RxMalformed[wire.ErrCRC.Reason()], r.sb.RxMalformed[wire.ErrShort.Reason()],
		r.xdpB.DroppedVersion, r.xdpB.DroppedShort, r.sb.ResetsSent, r.sb.ReplyRateLimited)
}
