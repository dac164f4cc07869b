package main

import (
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/telemetry"
)

func cannedSnapshot(at time.Time, sent uint64) *telemetry.Snapshot {
	e := telemetry.EngineSnapshot{Iface: "eth0", Queue: 1, Link: dataplane.LinkInfo{Backend: "afxdp", XDPMode: "native"},
		Responsive: true, Engine: telemetry.EngineCounters{RxPackets: 10 * sent, TxPackets: 20, BusyNanos: 1, IdleNanos: 3}}
	e.Transport.RxBytes, e.Transport.TxBytes = 1000*sent, 2048
	e.Transport.RxUnknownConn = 2
	e.Conns.Total, e.Conns.PathsActive, e.Conns.PathsSuspect = 1, 15, 1
	e.Top = []telemetry.ConnSnapshot{{ID: 0xabc, Peer: "10.0.0.2", State: "established", BytesOut: sent, SRTT: 12345,
		PathsActive: 15, PathsSuspect: 1, Paths: []telemetry.PathSnapshot{{ID: 3, Entropy: 50000, State: "suspect", LossRate: 0.25}}}}
	return &telemetry.Snapshot{Time: at, Engines: []telemetry.EngineSnapshot{e}}
}

// TestTables: the one-shot tables and a top refresh show what the
// snapshot holds, and top turns two snapshots into rates.
func TestTables(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := cannedSnapshot(t0, 1000)
	var b strings.Builder
	writeStatus(&b, s)
	for _, want := range []string{"eth0", "afxdp", "native", "15/1", "10000", "25.0%", "yes"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	writeQPs(&b, s, nil)
	for _, want := range []string{"abc", "10.0.0.2", "established", "12.3µs", "15/1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("qps lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := writePaths(&b, s, "ABC"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"conn abc", "50000", "suspect", "25.0%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("paths lacks %q:\n%s", want, b.String())
		}
	}
	if err := writePaths(&b, s, "def"); err == nil {
		t.Error("unknown connection not reported")
	}
	b.Reset()
	writeTop(&b, s, cannedSnapshot(t0.Add(time.Second), 126000))
	// 125000 more bytes sent in a second: 1.0 Mb/s; 1.25 M more packets.
	for _, want := range []string{"1.0Mb/s", "1250000"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("top lacks %q:\n%s", want, b.String())
		}
	}
}
