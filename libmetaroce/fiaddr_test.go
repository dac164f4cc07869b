package libmetaroce

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFiAddressing runs tests/fiaddr.c, built with the provider under
// AddressSanitizer and UndefinedBehaviorSanitizer, the ways applications
// written elsewhere address peers:
//
//   - local: the address vector refuses NULL and garbage names (the
//     provider crashed in fi_av_insert on the NULL dest_addr of an
//     in-band fi_getinfo), inserts by service and symbol, removes for
//     good; fi_getinfo(node, service) gives dest_addr, with FI_SOURCE
//     src_addr, and refuses domain capabilities it lacks;
//   - server and client: fabtests' in-band address exchange (no -E): the
//     client knows only the server's IP and port;
//   - both, twice: two endpoints that send to each other first at the same
//     moment (simultaneous connects refused both with -FI_ECONNREFUSED
//     while each waited in its connect for the other's accept).
func TestFiAddressing(t *testing.T) {
	pt := newProvTest(t, "fiaddr")
	prov, bin, a, b, socks := pt.prov, pt.bin, pt.a, pt.b, pt.socks
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	t.Run("local", func(t *testing.T) {
		l := start(t, ctx, a, bin, "local", socks[0], prov)
		l.wait(t, "local")
		t.Log(strings.TrimSpace(l.out.String()))
	})
	t.Run("inband", func(t *testing.T) {
		srv := start(t, ctx, b, bin, "server", socks[1], prov, "9228")
		srv.ready(t)
		cli := start(t, ctx, a, bin, "client", socks[0], prov, b.IPv4.String(), "9228")
		cli.wait(t, "client")
		srv.wait(t, "server")
		if !strings.Contains(srv.out.String(), "PASS server") {
			t.Errorf("server did not pass:\n%s", srv.out.String())
		}
	})
	for round := 0; round < 2; round++ {
		t.Run("simultaneous", func(t *testing.T) {
			up := t.TempDir()
			pa, pb := "9300", "9301"
			if round == 1 {
				pa, pb = "9302", "9303"
			}
			x := start(t, ctx, a, bin, "both", socks[0], prov, pa, b.IPv4.String(), pb, up)
			y := start(t, ctx, b, bin, "both", socks[1], prov, pb, a.IPv4.String(), pa, up)
			x.wait(t, "both a")
			y.wait(t, "both b")
		})
	}
}
