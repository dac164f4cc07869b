package sim

import (
	"testing"
	"time"
)

func lossyCfg(seed uint64) LossyConfig {
	link := DefaultLink
	link.Loss, link.Reorder, link.Dup, link.Corrupt = 0.05, 0.1, 0.02, 0.02
	return LossyConfig{Op: "write", Messages: 100, Size: 32768, Outstanding: 8, Streams: 2, Seed: seed, Link: link}
}

// TestDeterministic: the same seed gives the same run, event for event; a
// different seed gives a different one.
func TestDeterministic(t *testing.T) {
	r1, err := RunLossy(lossyCfg(3))
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := RunLossy(lossyCfg(3))
	r3, _ := RunLossy(lossyCfg(4))
	r1.WallS, r2.WallS, r3.WallS = 0, 0, 0
	if *r1 != *r2 {
		t.Errorf("same seed, different runs:\n%+v\n%+v", r1, r2)
	}
	r3.Seed = r1.Seed
	if *r1 == *r3 {
		t.Error("different seeds gave identical runs")
	}
}

// TestImpairmentsHappen: the link really drops, duplicates and corrupts at
// about the configured rates, and every corrupted packet is caught.
func TestImpairmentsHappen(t *testing.T) {
	r, err := RunLossy(lossyCfg(1))
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != "" || r.CorruptDelivered != 0 || r.DuplicatesDelivered != 0 {
		t.Fatalf("run: %+v", r)
	}
	total := float64(r.PacketsSent + r.AcksSent)
	if f := float64(r.WireDropped) / total; f < 0.03 || f > 0.07 {
		t.Errorf("dropped fraction %.3f, configured 0.05", f)
	}
	if r.WireCorrupted == 0 || r.CRCDrops < r.WireCorrupted {
		t.Errorf("corrupted %d, caught by CRC %d", r.WireCorrupted, r.CRCDrops)
	}
	if r.Duplicates == 0 {
		t.Error("no duplicate arrivals counted")
	}
}

// TestLimitReported: a run cut short by its time limit says so.
func TestLimitReported(t *testing.T) {
	c := lossyCfg(1)
	c.Limit = 50 * time.Microsecond
	r, err := RunLossy(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == "" || r.MessagesCompleted == r.Messages {
		t.Fatalf("a 50 us limit did not cut the run: %+v", r)
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []LossyConfig{
		{Op: "write", Messages: 0, Size: 1, Outstanding: 1, Streams: 1},
		{Op: "frobnicate", Messages: 1, Size: 1, Outstanding: 1, Streams: 1},
		{Op: "write", Messages: 1, Size: -1, Outstanding: 1, Streams: 1},
	} {
		if _, err := RunLossy(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// BenchmarkEventLoop measures the simulator's cost per event with the
// transport in the loop; allocations per event should round to zero.
func BenchmarkEventLoop(b *testing.B) {
	b.ReportAllocs()
	var events uint64
	for i := 0; i < b.N; i++ {
		r, err := RunLossy(lossyCfg(uint64(i + 1)))
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}
