package demo

import (
	"testing"
	"time"
)

// TestCPUWindow: the window runs from the sample before the count first
// moved to the one that ends its last move; idle samples at either end
// are left out, and a count that moved in one interval only gives none.
func TestCPUWindow(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ss := []cpuSample{
		{packets: 10, cpu: 1000, user: 500, sys: 500, at: at(0)},
		{packets: 10, cpu: 2000, user: 1000, sys: 1000, at: at(50)}, // idle: start-up
		{packets: 1010, cpu: 12000, user: 3000, sys: 9000, at: at(100)},
		{packets: 2010, cpu: 22000, user: 5000, sys: 17000, at: at(150)},
		{packets: 2010, cpu: 30000, user: 9000, sys: 21000, at: at(200)}, // idle: the tail
	}
	w := cpuWindow(ss)
	if w == nil {
		t.Fatal("no window")
	}
	// From sample 1 to sample 3: 2000 packets, 20000 ns, 4000 user, 16000 system.
	if w.Packets != 2000 || w.NsPerPacket != 10 || w.KernelShare != 0.8 || w.Seconds != 0.1 {
		t.Errorf("window %+v, want 2000 packets at 10 ns, kernel share 0.8, over 0.1 s", w)
	}
	if w := cpuWindow(ss[:3]); w != nil {
		t.Errorf("one interval of movement: %+v, want none", w)
	}
	if w := cpuWindow(nil); w != nil {
		t.Errorf("no samples: %+v", w)
	}
}
