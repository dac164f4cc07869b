package afxdp

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/wire"
)

func monoNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestArrivalStamp: the XDP program stamps each MetaRoCE packet's arrival
// into the frame's metadata and the link hands it over: the stamp lies
// between the moment the packet was submitted at the other end and the
// moment Receive returned it, and it is the packet's own (a frame
// reused for a later packet carries the later packet's time). At MTU
// 9000 (the frags program, multi-buffer sockets) both a probe, one
// buffer, and a full packet, gathered from a chain of three, carry it:
// without a stamp the engine times a packet when it takes it from the
// ring, and the receiver's wait there is counted as fabric delay.
func TestArrivalStamp(t *testing.T) {
	for _, c := range []struct{ mtu, size int }{{1500, 0}, {9000, 0}, {9000, 9000 - 28}} {
		t.Run(fmt.Sprintf("mtu%d-size%d", c.mtu, c.size), func(t *testing.T) { arrivalStamps(t, c.mtu, c.size) })
	}
}

// arrivalStamps sends 50 packets over a pair at mtu and checks their
// stamps: sealed PROBEs when size is 0, else UDP payloads of size bytes.
func arrivalStamps(t *testing.T, mtu, size int) {
	p := testnet.NewPair(t, testnet.Config{Link: testnet.LinkConfig{MTU: mtu}})
	open := func(h *testnet.Host) *Iface {
		var fi *Iface
		if err := h.Do(func() error {
			var err error
			fi, err = OpenIface(IfaceConfig{Name: h.Port.Name, Port: 4792, Mode: bpf.ModeAuto, MTU: mtu})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fi.Close() })
		return fi
	}
	fa, fb := open(p.A), open(p.B)
	if !fb.Program.Stamped() {
		t.Skip("this kernel refuses bpf_xdp_adjust_meta to XDP programs: the unstamped program is loaded, and the engine times arrivals itself (bpf.TestLoadFallsBackWithoutStamp)")
	}
	la, lb := fa.Links[0], fb.Links[0]
	tx := make([]dataplane.TxPacket, 1)
	rx := make([]dataplane.RxPacket, 8)
	got := 0
	for i := 0; got < 50 && i < 5000; i++ {
		if la.ReserveTx(tx) != 1 {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		n := size
		if n == 0 {
			h := wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq, DstConn: 1, PathSeq: uint32(i), Timestamp: 1}
			h.Put(tx[0].Buf)
			n = wire.DataLen + wire.TrailerLen
			wire.Seal(tx[0].Buf[:n])
		} else {
			tx[0].Buf[0] = wire.Version // or XDP drops it
		}
		tx[0].Len, tx[0].Dst, tx[0].SrcPort = n, fb.Local, 50000
		sent := monoNow(t)
		if err := la.SubmitTx(tx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Millisecond)
		for time.Now().Before(deadline) {
			k := lb.Receive(rx)
			if k == 0 {
				continue
			}
			after := monoNow(t)
			for _, r := range rx[:k] {
				if len(r.Payload) != n {
					t.Fatalf("packet %d: %d bytes, sent %d", i, len(r.Payload), n)
				}
				if r.Arrival == 0 {
					t.Fatalf("packet %d: no arrival stamp (XDP mode %v, %d gathered from chains)", i, fb.Attachment.Mode, lb.Stats.RxChained)
				}
				if r.Arrival < sent || r.Arrival > after {
					t.Errorf("packet %d: arrival %d ns after its submission, %d ns before Receive returned: not its own stamp",
						i, r.Arrival-sent, after-r.Arrival)
				}
			}
			lb.Release(rx[:k])
			got += k
			break
		}
	}
	if got < 50 {
		t.Fatalf("only %d of 50 packets arrived (A: %+v)", got, la.Stats)
	}
	if chained := lb.Stats.RxChained > 0; chained != (size > SingleBufferMTU) {
		t.Fatalf("%d of %d packets gathered from chains", lb.Stats.RxChained, got)
	}
}
