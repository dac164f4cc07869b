package sim

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
)

// TestConnStateBytes prints what a connection end costs (docs/scale.md
// quotes these lines) and checks the fabric configuration is the small
// one it claims to be, and that the defaults' windows cost what a
// connection uses, not what they allow (transport/grow.go: 166 KB a
// connection end when they were allocated whole).
func TestConnStateBytes(t *testing.T) {
	fab := FabricTransport
	fab.MaxPathID = transport.Defaults.Paths
	rows := []struct {
		name string
		tc   transport.Config
	}{
		{"defaults", transport.Config{}},
		{"fabric, 16 paths", fab},
		{"fabric, 64 paths", withPaths(fab, 64)},
		{"fabric + metaroce", withCC(fab)},
		{"fabric rocev2", withMode(fab, transport.ModeRoCEv2)},
	}
	got := map[string]float64{}
	for _, r := range rows {
		b, err := ConnStateBytes(r.tc, 64)
		if err != nil {
			t.Fatal(err)
		}
		got[r.name] = b
		t.Logf("%-18s %8.0f bytes per connection end", r.name, b)
	}
	perPath := (got["fabric, 64 paths"] - got["fabric, 16 paths"]) / 48
	t.Logf("per path: %.0f bytes", perPath)
	if got["fabric, 16 paths"] >= got["defaults"] {
		t.Errorf("fabric config %.0f bytes, defaults %.0f: not the small one", got["fabric, 16 paths"], got["defaults"])
	}
	if got["defaults"] > 64<<10 {
		t.Errorf("defaults %.0f bytes per connection end after 64 packets: the windows are allocated whole, not as used", got["defaults"])
	}
	if perPath <= 0 {
		t.Errorf("per-path cost %.0f", perPath)
	}
}

func withPaths(tc transport.Config, p int) transport.Config {
	tc.Paths, tc.MaxPathID = p, p
	return tc
}

func withMode(tc transport.Config, m transport.Mode) transport.Config {
	tc.Mode = m
	tc.MaxPathID = 1
	return tc
}
