package bench

import (
	"net"
	"testing"

	"github.com/asavie/xdp"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/internal/testnet"
	"golang.org/x/sys/unix"
)

// TestAsavieCloseLeavesRings pins down why closeAsavie exists: after
// asavie's own Close the socket's ring mappings remain, and they keep the
// socket bound, so the queue cannot be bound again; once they are unmapped
// it can.
func TestAsavieCloseLeavesRings(t *testing.T) {
	needRoot(t)
	p := testnet.NewPair(t, testnet.Config{})
	h := p.A
	var ifindex int
	var s *xdp.Socket
	if err := h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Port.Name)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		s, err = xdp.NewSocket(ifindex, 0, &xdp.SocketOptions{NumFrames: 64, FrameSize: 2048,
			FillRingNumDescs: 64, CompletionRingNumDescs: 64, RxRingNumDescs: 64, TxRingNumDescs: 64})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(s.FD(), &st); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ms, err := socketMappings()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		if m.ino == st.Ino {
			n++
		}
	}
	t.Logf("after asavie's Close: %d mappings of socket:[%d] remain", n, st.Ino)
	open := func() error {
		return h.Do(func() error {
			x, err := xsk.Open(ifindex, 0, xsk.Config{NumFrames: 64})
			if err == nil {
				x.Close()
			}
			return err
		})
	}
	if n > 0 {
		if err := open(); err == nil {
			t.Errorf("queue could be bound again with %d ring mappings left: the leak does not hold the socket", n)
		} else {
			t.Logf("bind while the mappings remain: %v", err)
		}
	}
	if err := unmapSocket(ms, st.Ino); err != nil {
		t.Fatal(err)
	}
	if err := open(); err != nil {
		t.Fatalf("bind after unmapping the rings: %v", err)
	}
}
