package ring

import "testing"

// TestYieldGate: occasional stalls leave the gate yielding; stalls on most
// waits make it sleep, probing one wait in 16; once the probes stop
// stalling, it yields again.
func TestYieldGate(t *testing.T) {
	var g YieldGate
	for i := range 1000 { // one wait in 50 stalls: keep yielding
		if !g.Start() {
			t.Fatalf("wait %d: the gate stopped yielding at %d/256 after occasional stalls", i, g.avg)
		}
		if i%50 == 0 {
			g.Stalled()
		} else {
			g.Done()
		}
	}
	yields := 0
	for range 320 { // every yielding wait stalls
		if g.Start() {
			yields++
			g.Stalled()
		}
	}
	if g.Yielding() || yields > 320/gateProbe+8 {
		t.Fatalf("under stalls on every wait: %d of 320 waits yielded, gate at %d/256", yields, g.avg)
	}
	if yields < 320/gateProbe {
		t.Fatalf("%d of 320 waits probed, want one in %d", yields, gateProbe)
	}
	for i := 0; !g.Yielding(); i++ { // the contention is gone: probes succeed
		if g.Start() {
			g.Done()
		}
		if i > 40*gateProbe {
			t.Fatalf("still sleeping at %d/256 after %d waits without a stall", g.avg, i)
		}
	}
}
