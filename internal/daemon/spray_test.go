package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/telemetry"
)

// TestUDPBackendSprays: two daemons on the UDP backend, on hosts of
// different leaves of a 4-spine fabric whose leaves hash the UDP source
// port (ECMP), move verified WRITEs over one connection. The link sends
// every packet from the source port its path picked, so the connection's
// packets spread over every spine (each carries at least 10% of them, by
// the spines' own counters), and every path's entropy is a port the link
// bound. Then a spine is blackholed mid-transfer: the transport's repathing
// moves the paths that hashed onto it to the other spines, the transfer
// completes with every byte verified, and the remaining spines share the
// traffic after the cut.
func TestUDPBackendSprays(t *testing.T) {
	const spines, cut = 4, 1
	f := testnet.NewLeafSpine(t, testnet.LeafSpineConfig{Spines: spines, HostsPerLeaf: 1})
	a, b := f.Leaves[0].Hosts[0], f.Leaves[1].Hosts[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the cleanups that wait for the daemons
	// The spread is sampled twice: the link's 256 source ports over the
	// spines (64 +- 7 each, binomial), then the paths' entropy values over
	// those ports: 128 paths put 32 +- 4.9 on each spine, so 10% is about
	// 3 standard deviations off; the default 16 paths would leave a spine
	// with one path or none about one run in four.
	const paths = 128
	setPaths := func(c *config.Config) { c.Paths = paths }
	ca := startDaemonQueues(t, ctx, a, config.BackendUDP, []int{0}, setPaths)
	cb := startDaemonQueues(t, ctx, b, config.BackendUDP, []int{0}, setPaths)
	st, err := ca.Do(Request{Op: "status"})
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi uint16
	why := st.Engines[0].Link.Why
	if i := strings.Index(why, "source ports "); i < 0 {
		t.Fatalf("link has no source-port pool: %s", why)
	} else if _, err := fmt.Sscanf(why[i:], "source ports %d..%d", &lo, &hi); err != nil {
		t.Fatalf("link why %q: %v", why, err)
	}

	// Spraying.
	const size = 65536
	c0 := spineCounts(t, f)
	fl := writeVerified(t, ctx, ca.path, cb.path, b.IPv4, 0, 1024, size)
	d := subCounts(spineCounts(t, f), c0)
	t.Logf("sprayed: %.2f Gb/s, spine packets %v", fl.gbps(1024*size), d)
	checkShares(t, "before the cut", d, -1)
	if t.Failed() || testing.Verbose() {
		// Where the fabric hashes the link's ports (data direction): a
		// spine with few of them gets little, whatever the transport does.
		ports := make([]int, spines)
		for p := lo; p <= hi; p++ {
			s, err := f.SpineOf(a, b.IPv4, "udp", p, uint16(config.Defaults().Port))
			if err != nil {
				t.Fatal(err)
			}
			ports[s]++
		}
		t.Logf("source ports %d..%d per spine, a to b: %v", lo, hi, ports)
	}
	if err := ca.Watch(WatchParams{Count: 1, Paths: true}, func(s *telemetry.Snapshot) error {
		e := s.Engines[0]
		if len(e.Top) != 1 || len(e.Top[0].Paths) != paths {
			return fmt.Errorf("want one connection with %d paths: %+v", paths, e.Top)
		}
		for _, p := range e.Top[0].Paths {
			if p.Entropy < lo || p.Entropy > hi {
				t.Errorf("path %d: entropy %d outside the link's source ports %d..%d", p.ID, p.Entropy, lo, hi)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A spine blackholed mid-transfer.
	type cutAt struct {
		at     time.Time
		counts []testnet.SpineCount
		err    error
	}
	cutc := make(chan cutAt, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		err := f.CutSpine(cut, testnet.Blackhole)
		at := time.Now()
		c, cerr := f.SpineCounts()
		if err == nil {
			err = cerr
		}
		cutc <- cutAt{at, c, err}
	}()
	t.Cleanup(func() { f.RestoreSpine(cut) })
	before, err := ca.Do(Request{Op: "status"})
	if err != nil {
		t.Fatal(err)
	}
	c1 := spineCounts(t, f)
	const messages = 4096
	start := time.Now()
	fl = writeVerified(t, ctx, ca.path, cb.path, b.IPv4, 0, messages, size)
	end := time.Now()
	c := <-cutc
	if c.err != nil {
		t.Fatal(c.err)
	}
	if !c.at.Before(end) {
		t.Fatalf("the transfer (%v) ended before the cut: make it longer", end.Sub(start))
	}
	after := subCounts(spineCounts(t, f), c.counts)
	t.Logf("cut spine %d %v into a %v transfer (%.2f Gb/s): spine packets before the cut %v, after %v",
		cut, c.at.Sub(start), end.Sub(start), fl.gbps(messages*size), subCounts(c.counts, c1), after)
	if after[cut].Packets != 0 {
		t.Errorf("the blackholed spine forwarded %d packets", after[cut].Packets)
	}
	checkShares(t, "after the cut", after, cut)
	st, err = ca.Do(Request{Op: "status"})
	if err != nil {
		t.Fatal(err)
	}
	tr, tr0 := st.Engines[0].Transport, before.Engines[0].Transport
	t.Logf("paths suspected %d, retired %d, packets retransmitted %d",
		tr.PathsSuspected-tr0.PathsSuspected, tr.PathsRetired-tr0.PathsRetired, tr.DataRetransmitted-tr0.DataRetransmitted)
	if tr.PathsSuspected == tr0.PathsSuspected {
		t.Error("a spine blackholed and no path suspected")
	}
	cancel()
}

func spineCounts(t *testing.T, f *testnet.LeafSpine) []testnet.SpineCount {
	t.Helper()
	c, err := f.SpineCounts()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func subCounts(now, earlier []testnet.SpineCount) []testnet.SpineCount {
	d := make([]testnet.SpineCount, len(now))
	for i := range now {
		d[i] = now[i].Sub(earlier[i])
	}
	return d
}

// checkShares wants every spine but skip to have carried at least 10% of
// the packets.
func checkShares(t *testing.T, when string, d []testnet.SpineCount, skip int) {
	t.Helper()
	var total uint64
	for _, c := range d {
		total += c.Packets
	}
	if total == 0 {
		t.Fatalf("%s: the spines forwarded nothing", when)
	}
	for i, c := range d {
		if i == skip {
			continue
		}
		if share := float64(c.Packets) / float64(total); share < 0.10 {
			t.Errorf("%s: spine %d carried %.1f%% of %d packets, want at least 10%%", when, i, 100*share, total)
		}
	}
}
