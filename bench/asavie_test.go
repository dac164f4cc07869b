package bench

import (
	"strings"
	"testing"

	"github.com/asavie/xdp"
	"github.com/metaroce/metaroce/internal/testnet"
)

// TestAsavieTransmitPanicIsError: asavie's Transmit panics when sendto
// fails with an errno it does not expect (here ENETDOWN, the link being
// down); transmit turns that into an error.
func TestAsavieTransmitPanicIsError(t *testing.T) {
	needRoot(t)
	p := testnet.NewPair(t, testnet.Config{})
	opts, err := RawOptions{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	h, err := openAsavieHost(p.A, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.close(); err != nil {
			t.Error(err)
		}
	}()
	tm, err := newTemplate(endpoints(p.A, p.B, opts), 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	descs := h.sock.GetDescs(1)
	if _, err := tm.build(h.sock.GetFrame(descs[0]), kindProbe, 0); err != nil {
		t.Fatal(err)
	}
	descs[0].Len = 64
	if err := p.A.Port.SetDown(); err != nil {
		t.Fatal(err)
	}
	n, err := transmit(h.sock, []xdp.Desc{descs[0]})
	t.Logf("transmit on a link that is down: %d queued, %v", n, err)
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("want the recovered panic as an error, got %v", err)
	}
	if n != 1 {
		t.Errorf("%d descriptors reported queued, want 1 (the panic comes after the ring took it)", n)
	}
}
