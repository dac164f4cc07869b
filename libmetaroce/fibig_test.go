package libmetaroce

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFiBig runs tests/fibig.c, built with the provider under
// AddressSanitizer and UndefinedBehaviorSanitizer, between two daemons
// through a switch dropping 1%. It proves messages past one bounce slot:
// tagged and FI_MSG ones of 0 B to 16 MiB and a tagged one of 256 MiB
// (the segment edges 64 KiB-1, 64 KiB, 64 KiB+1 among them), every byte
// checked against a pattern of the message and the offset and the bytes
// around every receive buffer untouched, with remote CQ data, from a
// registered buffer in place, from three iovs and into four; matching
// and FI_ORDER_SAS for large sends back to back (receives posted in
// reverse order of tags, three with one tag in sending order); large
// unexpected messages with FI_PEEK, FI_CLAIM (of one still arriving) and
// FI_DISCARD, and one received later; a large send truncated by a short
// receive (FI_ETRUNC, olen) with the next message whole; FI_MULTI_RECV
// (FI_OPT_MIN_MULTI_RECV, messages back to back in two buffers, the
// release flag exactly where less than the minimum is left, a buffer
// posted after its messages came); fi_cancel (FI_ECANCELED with the
// context, -FI_ENOENT for what is not posted); fi_rx_size_left and
// fi_tx_size_left; fi_write and fi_read of 16 MiB and 256 MiB from and
// into registered and unregistered memory and fi_writedata of 16 MiB
// whose CQ data comes once; and that a connection ending mid-message
// fails the send (the receiver closed its endpoint) and the receive (the
// sender died), without a hang.
func TestFiBig(t *testing.T) {
	pt := newProvTest(t, "fibig")
	prov, bin, a, b, socks := pt.prov, pt.bin, pt.a, pt.b, pt.socks
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := start(t, ctx, b, bin, "server", socks[1], prov)
	f := srv.ready(t)
	if len(f) != 4 {
		t.Fatalf("server: READY %v", f)
	}
	cli := start(t, ctx, a, bin, append([]string{"client", socks[0], prov}, f...)...)
	cli.wait(t, "client")
	srv.wait(t, "server")
	t.Logf("client:\n%s\nserver:\n%s", strings.TrimSpace(cli.out.String()), strings.TrimSpace(srv.out.String()))
	if !strings.Contains(srv.out.String(), "PASS server") {
		t.Errorf("server did not pass:\n%s", srv.out.String())
	}
}
