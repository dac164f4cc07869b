package congestion

import (
	"math"
	"testing"
	"time"
)

func newFS(t testing.TB, cfg FairShareConfig) *FairShare {
	t.Helper()
	if cfg.LineRate == 0 {
		cfg.LineRate = 100e9
	}
	f, err := NewFairShare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// traffic has each sender send `bytes[i]` per microsecond for d.
func traffic(f *FairShare, now *Time, d Time, bytes map[uint64]int) {
	for end := *now + d; *now < end; *now += 1000 {
		for id, b := range bytes {
			f.Observe(*now, id, b)
		}
	}
}

func TestFairShareSplitsEqually(t *testing.T) {
	f := newFS(t, FairShareConfig{})
	var share uint64
	for i := uint64(1); i <= 32; i++ {
		share = f.Observe(1000, i*7919, 4096)
	}
	if f.Active() != 32 || share != uint64(100e9*0.95/32) {
		t.Errorf("32 senders: active %d share %d, want 32 and %d", f.Active(), share, uint64(100e9*0.95/32))
	}
	if s := f.Share(7919); s != share {
		t.Errorf("Share = %d, Observe said %d", s, share)
	}
	if f.Share(1) != 0 {
		t.Error("share of an unknown sender")
	}
}

func TestFairShareExpiresIdleSenders(t *testing.T) {
	f := newFS(t, FairShareConfig{})
	now := Time(0)
	traffic(f, &now, 50_000, map[uint64]int{1: 1000, 2: 1000, 3: 1000, 4: 1000})
	if f.Active() != 4 {
		t.Fatalf("active %d", f.Active())
	}
	// Senders 3 and 4 stop; after the 100 us idle timeout (and the next
	// 20 us interval) the others share between two.
	traffic(f, &now, 150_000, map[uint64]int{1: 1000, 2: 1000})
	if f.Active() != 2 || f.Share(1) != uint64(100e9*0.95/2) || f.Share(3) != 0 {
		t.Errorf("after expiry: active %d share %d", f.Active(), f.Share(1))
	}
	if st := f.Stats(); st.Expired != 2 || st.Joined != 4 {
		t.Errorf("stats %+v", st)
	}
	f.Remove(2)
	if f.Active() != 1 || f.Share(1) != uint64(100e9*0.95) {
		t.Errorf("after Remove: active %d share %d", f.Active(), f.Share(1))
	}
	// Tick expires without traffic.
	f.Tick(now + 1_000_000)
	if f.Active() != 0 {
		t.Errorf("after Tick: active %d", f.Active())
	}
}

func TestFairShareWaterFills(t *testing.T) {
	f := newFS(t, FairShareConfig{DemandAware: true, MinShareFrac: 0.01})
	now := Time(0)
	// Sender 1 sends 1 Gb/s (125 bytes/us); 2 and 3 send as much as they
	// can (they would take the whole link).
	traffic(f, &now, 100_000, map[uint64]int{1: 125, 2: 12500, 3: 12500})
	r := 100e9 * 0.95
	light, big := float64(f.Share(1)), float64(f.Share(2))
	// Sender 1 claims 2 x its rate and the others split the rest; its
	// own hint is the equal share, so its next burst is not held to its
	// average rate.
	if want := r / 3; math.Abs(light-want)/want > 0.001 {
		t.Errorf("light sender's hint %.4g, want the equal share %.4g", light, want)
	}
	if want := (r - 2e9) / 2; math.Abs(big-want)/want > 0.01 || f.Share(3) != f.Share(2) {
		t.Errorf("heavy senders' shares %.4g / %d, want %.4g", big, f.Share(3), want)
	}
	// With the default floor, a light sender's claim is a quarter of the
	// equal share (here above twice its rate): the heavy ones split the
	// rest.
	f = newFS(t, FairShareConfig{DemandAware: true})
	now = 0
	traffic(f, &now, 100_000, map[uint64]int{1: 125, 2: 12500, 3: 12500})
	if s, want := float64(f.Share(2)), (r-r/3/4)/2; math.Abs(s-want)/want > 0.001 {
		t.Errorf("heavy share beside a floored claim %.4g, want %.4g", s, want)
	}
	// All light: the leftover is handed out, so the shares still add up.
	f = newFS(t, FairShareConfig{DemandAware: true})
	now = 0
	traffic(f, &now, 100_000, map[uint64]int{1: 125, 2: 125})
	if sum := float64(f.Share(1) + f.Share(2)); math.Abs(sum-r)/r > 0.001 {
		t.Errorf("shares add up to %.4g, want %.4g", sum, r)
	}
}

func TestFairShareOverflow(t *testing.T) {
	f := newFS(t, FairShareConfig{MaxSenders: 4})
	for i := uint64(0); i < 6; i++ {
		f.Observe(1000, i, 100)
	}
	if st := f.Stats(); st.Active != 4 || st.Overflows != 2 {
		t.Errorf("stats %+v, want 4 active and 2 overflows", st)
	}
}

func TestFairShareRejectsBadConfig(t *testing.T) {
	for _, c := range []FairShareConfig{{}, {LineRate: 1, Utilisation: 2}, {LineRate: 1, MaxSenders: -1}, {LineRate: 1, DemandHeadroom: 0.5}} {
		if _, err := NewFairShare(c); err == nil {
			t.Errorf("NewFairShare(%+v) accepted", c)
		}
	}
}

func TestFairShareObserveDoesNotAllocate(t *testing.T) {
	f := newFS(t, FairShareConfig{DemandAware: true})
	now := Time(0)
	id := uint64(0)
	allocs := testing.AllocsPerRun(10000, func() {
		now += 100
		id = (id + 1) % 600 // joins, expiries and recomputes included
		f.Observe(now, id, 4096)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocs per Observe", allocs)
	}
}

// TestFairShareRemoveKeepsIndex: senders joining and leaving in any order
// (connections closing) leave the index finding exactly the live ones,
// with a small table so probe chains collide and wrap.
func TestFairShareRemoveKeepsIndex(t *testing.T) {
	f := newFS(t, FairShareConfig{MaxSenders: 64, IdleTimeout: time.Hour})
	live := map[uint64]bool{}
	rng := uint64(88172645463325252)
	next := func() uint64 {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return rng
	}
	for step := 0; step < 20000; step++ {
		id := next()%200 + 1
		if live[id] || len(live) == 64 {
			// Remove a live one (this or any).
			if !live[id] {
				for k := range live {
					id = k
					break
				}
			}
			f.Remove(id)
			delete(live, id)
		} else {
			f.Observe(1000, id, 100)
			live[id] = true
		}
		if f.Active() != len(live) {
			t.Fatalf("step %d: %d active, want %d", step, f.Active(), len(live))
		}
		if step%97 == 0 {
			for k := uint64(1); k <= 200; k++ {
				if got := f.find(k) >= 0; got != live[k] {
					t.Fatalf("step %d: sender %d found %v, live %v", step, k, got, live[k])
				}
				if i := f.find(k); i >= 0 && f.ents[i].id != k {
					t.Fatalf("step %d: index points sender %d at %d's entry", step, k, f.ents[i].id)
				}
			}
		}
	}
}
