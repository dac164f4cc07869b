package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/telemetry"
)

func cannedSnapshot(at time.Time, sent uint64) *telemetry.Snapshot {
	e := telemetry.EngineSnapshot{Iface: "eth0", Queue: 1, Link: dataplane.LinkInfo{Backend: "afxdp", XDPMode: "native"},
		Responsive: true, Engine: telemetry.EngineCounters{RxPackets: 10 * sent, TxPackets: 20, BusyNanos: 1, IdleNanos: 3,
			CPU: &dataplane.EngineCPU{Nanos: 12_250_000_000, UserNanos: 3e9, SysNanos: 9e9}}}
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
	for _, want := range []string{"eth0", "afxdp", "native", "15/1", "10000", "25.0%", "12.3s (75%)", "yes"} {
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
	writePaths(&b, s)
	for _, want := range []string{"conn abc", "50000", "suspect", "25.0%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("paths lacks %q:\n%s", want, b.String())
		}
	}
	// A connection over two planes, plane 1 down: the planes table.
	s.Engines[0].Top[0].Planes = []telemetry.PlaneSnapshot{{Plane: 0, Peer: "10.110.1.2", Paths: 8, ActivePaths: 8},
		{Plane: 1, Peer: "10.111.1.2", Paths: 8, Down: true, DownFor: int64(3 * time.Millisecond)}}
	b.Reset()
	writePaths(&b, s)
	for _, want := range []string{"PLANE", "10.111.1.2", "DOWN", "0/8", "8/8", "3ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("paths lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	next := cannedSnapshot(t0.Add(time.Second), 126000)
	next.Engines[0].Engine.CPU = &dataplane.EngineCPU{Nanos: 12_250_000_000 + 870_000_000, UserNanos: 3e9 + 250e6, SysNanos: 9e9 + 750e6}
	writeTop(&b, s, next)
	// 125000 more bytes sent in a second: 1.0 Mb/s; 1.25 M more packets;
	// 0.87 s of CPU in it, three quarters in the kernel.
	for _, want := range []string{"1.0Mb/s", "1250000", "87% (75%)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("top lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPathsConn: paths -conn ID shows that connection only, in the table
// and in the JSON alike, and names an id it does not find.
func TestPathsConn(t *testing.T) {
	two := func() *telemetry.Snapshot {
		s := cannedSnapshot(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1000)
		s.Engines[0].Top = append(s.Engines[0].Top, telemetry.ConnSnapshot{ID: 0xdef, Peer: "10.0.0.3", State: "established",
			Paths: []telemetry.PathSnapshot{{ID: 7, Entropy: 40000, State: "active"}}})
		return s
	}
	for _, asJSON := range []bool{false, true} {
		var b strings.Builder
		if err := emitPaths(&b, two(), "ABC", asJSON); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "50000") || strings.Contains(b.String(), "40000") || strings.Contains(b.String(), "10.0.0.3") {
			t.Errorf("json %v: -conn abc printed another connection:\n%s", asJSON, b.String())
		}
		if asJSON {
			var s telemetry.Snapshot
			if err := json.Unmarshal([]byte(b.String()), &s); err != nil || len(s.Engines) != 1 || len(s.Engines[0].Top) != 1 || s.Engines[0].Top[0].ID != 0xabc {
				t.Errorf("json: %v, %+v", err, s.Engines)
			}
		}
		b.Reset()
		if err := emitPaths(&b, two(), "", asJSON); err != nil || !strings.Contains(b.String(), "50000") || !strings.Contains(b.String(), "40000") {
			t.Errorf("json %v: without -conn: %v\n%s", asJSON, err, b.String())
		}
		b.Reset()
		if err := emitPaths(&b, two(), "123", asJSON); err == nil || !strings.Contains(err.Error(), "no connection 123") || b.Len() != 0 {
			t.Errorf("json %v: unknown connection: %v, printed %q", asJSON, err, b.String())
		}
	}
}
