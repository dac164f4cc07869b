package xsk

import (
	"testing"
	"time"
)

func TestFramePool(t *testing.T) {
	p := NewFramePool(8, 2048)
	if p.Free() != 8 || p.Cap() != 8 || p.FrameSize() != 2048 {
		t.Fatalf("new pool: free %d cap %d", p.Free(), p.Cap())
	}
	seen := map[uint64]bool{}
	a, ok := p.Get()
	if !ok || a != 0 {
		t.Fatalf("first Get = %d, %v; want frame 0", a, ok)
	}
	seen[a] = true
	dst := make([]uint64, 10)
	n := p.GetN(dst)
	if n != 7 || p.Free() != 0 {
		t.Fatalf("GetN got %d, free %d", n, p.Free())
	}
	for _, a := range dst[:n] {
		if a%2048 != 0 || a >= 8*2048 || seen[a] {
			t.Fatalf("bad or repeated frame %d", a)
		}
		seen[a] = true
	}
	if _, ok := p.Get(); ok {
		t.Fatal("Get on empty pool succeeded")
	}
	// RX descriptors point past the headroom: Put rounds down.
	p.Put(3*2048 + 256 + 17)
	if a, _ := p.Get(); a != 3*2048 {
		t.Fatalf("Put of an inner address came back as %d", a)
	}
	p.PutN(dst[:n])
	p.Put(3 * 2048)
	if p.Free() != 8 {
		t.Fatalf("free %d after returning all", p.Free())
	}
	if got := p.FrameStart(5*2048 + 100); got != 5*2048 {
		t.Fatalf("FrameStart = %d", got)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("double Put did not panic")
			}
		}()
		p.Put(0)
	}()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("PutN overflow did not panic")
			}
		}()
		p.PutN([]uint64{0})
	}()
}

func TestFramePoolNoAllocs(t *testing.T) {
	p := NewFramePool(256, 4096)
	buf := make([]uint64, 64)
	allocs := testing.AllocsPerRun(100, func() {
		n := p.GetN(buf)
		p.PutN(buf[:n])
		a, _ := p.Get()
		p.Put(a)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
}

func TestConfigResolve(t *testing.T) {
	c, err := Config{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.FrameSize != 2048 || c.NumFrames != 4096 || c.RxSize != 2048 || c.TxSkbBudget != 256 ||
		c.BindTimeout != 500*time.Millisecond {
		t.Fatalf("defaults: %+v", c)
	}
	if got := (Config{}).MaxFrameLen(); got != 2048-256 {
		t.Fatalf("MaxFrameLen = %d", got)
	}
	c, _ = Config{TxSize: 64}.resolve()
	if c.TxSkbBudget != 64 {
		t.Errorf("budget not capped at tx ring size: %d", c.TxSkbBudget)
	}
	c, _ = Config{TxSize: 16}.resolve()
	if c.TxSkbBudget != 32 {
		t.Errorf("budget below the kernel's minimum: %d", c.TxSkbBudget)
	}
	c, _ = Config{BusyPoll: &BusyPoll{}}.resolve()
	if c.BusyPoll.Usecs != 20 || c.BusyPoll.Budget != 64 {
		t.Errorf("busy poll defaults %+v", *c.BusyPoll)
	}
	for _, bad := range []Config{
		{FrameSize: 1024},
		{FrameSize: 3000},
		{FrameSize: 8192},
		{Headroom: 2048 - 256},
		{RxSize: 100},
		{FillSize: 1 << 25},
		{NoRX: true, NoTX: true},
		{Mode: 7},
	} {
		if _, err := bad.resolve(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
