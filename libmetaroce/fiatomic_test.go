package libmetaroce

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFiAtomic runs tests/fiatomic.c, built with the provider under
// AddressSanitizer and UndefinedBehaviorSanitizer, between two daemons
// through a switch dropping 1%: a server that registers the targets and a
// client that runs FI_ATOMIC and counters against it, in a domain with
// FI_RMA (provider keys, virtual addresses) and one without (the keys the
// application chose, offsets), as fabtests' fi_rdm_atomic gets it. Every
// operation of every class (base, fetch, compare) on every datatype the
// provider offers, on 7 elements, pipelined behind a write of the whole
// region and followed by a read of it, checked against a reference
// computed in the client (target values, the bytes around them, fetched
// old values, compare operations that both take and do not, completion
// flags); FI_EACCES for a bad key, a range outside the region and access
// the registration does not grant, with nothing written (the server
// checks); an atomic to the endpoint itself; the calls' refusals;
// fi_query_atomic and the valid calls for every combination. Counters on
// an endpoint with FI_SELECTIVE_COMPLETION: sends, RMA and atomics counted
// with no CQ entry, bad keys counted as errors, fi_cntr_wait reaching a
// threshold, ending with -FI_EAVAIL on an error and timing out,
// fi_cntr_set and add; the server's receive counter counts receives that
// make no CQ entry and a truncated one as an error.
func TestFiAtomic(t *testing.T) {
	pt := newProvTest(t, "fiatomic")
	prov, bin, a, b, socks := pt.prov, pt.bin, pt.a, pt.b, pt.socks
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := start(t, ctx, b, bin, "server", socks[1], prov)
	f := srv.ready(t)
	if len(f) != 11 {
		t.Fatalf("server: READY %v", f)
	}
	cli := start(t, ctx, a, bin, append([]string{"client", socks[0], prov}, f...)...)
	cli.wait(t, "client")
	srv.wait(t, "server")
	t.Logf("client: %s\nserver: %s", strings.TrimSpace(cli.out.String()), strings.TrimSpace(srv.out.String()))
	if !strings.Contains(srv.out.String(), "PASS server") {
		t.Errorf("server did not pass:\n%s", srv.out.String())
	}
}
