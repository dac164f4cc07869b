package transport_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// TestScatterGather: a WRITE and a SEND whose local side is a gather
// list of uneven pieces (one empty, one spanning several packets) land as
// the pieces one after the other, byte for byte, over a lossy, reordering
// link (retransmissions gather again); a READ into a scatter list puts
// each byte back in its piece.
func TestScatterGather(t *testing.T) {
	link := sim.DefaultLink
	link.Loss, link.Reorder = 0.05, 0.2
	p := newPair(t, transport.Config{}, link, 1<<16)
	p.connect()
	src := pattern(9000, 4)
	sgl := [][]byte{src[:7], src[7:7], src[7:5000], src[5000:]}
	if err := p.ca.PostWrite(&transport.WorkRequest{WRID: 1, SGL: sgl, RemoteAddr: regionAddr + 100, RKey: p.key}); err != nil {
		t.Fatal(err)
	}
	recv := make([]byte, 9000)
	if err := p.cb.PostRecv(9, recv); err != nil {
		t.Fatal(err)
	}
	if err := p.ca.PostSend(&transport.WorkRequest{WRID: 2, SGL: sgl, Stream: 1}); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 9000)
	scatter := [][]byte{back[:1], back[1:4097], back[4097:]}
	if err := p.ca.PostRead(&transport.WorkRequest{WRID: 3, SGL: scatter, RemoteAddr: regionAddr + 100, RKey: p.key}); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.runUntil(2*time.Second, func() bool {
		return count(p.cqA, transport.OpRead, transport.StatusOK) == 1 &&
			count(p.cqA, transport.OpSend, transport.StatusOK) == 1
	})
	if count(p.cqA, transport.OpWrite, transport.StatusOK) != 1 || count(p.cqA, transport.OpRead, transport.StatusOK) != 1 ||
		count(p.cqA, transport.OpSend, transport.StatusOK) != 1 {
		t.Fatalf("completions %+v", p.cqA)
	}
	for _, c := range p.cqA {
		if c.Op == transport.OpWrite && c.Bytes != len(src) {
			t.Errorf("write completion of %d bytes, want %d", c.Bytes, len(src))
		}
	}
	if !bytes.Equal(p.region[100:100+len(src)], src) {
		t.Error("WRITE from a gather list did not land byte-exact")
	}
	if !bytes.Equal(recv, src) {
		t.Error("SEND from a gather list did not land byte-exact")
	}
	if !bytes.Equal(back, src) {
		t.Error("READ into a scatter list did not land byte-exact")
	}
}
