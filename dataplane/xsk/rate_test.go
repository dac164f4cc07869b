package xsk

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
	"golang.org/x/sys/unix"
)

// TestPacketRate measures packets per second from one AF_XDP socket to
// another across a veth pair, 64-byte frames, one goroutine sending and one
// receiving, each locked to a thread pinned to its own CPU. It is a
// measurement, not a check, so it runs only when asked:
//
//	METAROCE_XSK_RATE=1 go test -run PacketRate -v ./dataplane/xsk
//
// METAROCE_XSK_RATE_SECONDS sets the length of each run (default 3).
func TestPacketRate(t *testing.T) {
	if os.Getenv("METAROCE_XSK_RATE") == "" {
		t.Skip("a measurement: set METAROCE_XSK_RATE=1 to run it")
	}
	needRoot(t)
	dur := 3 * time.Second
	if s, err := strconv.ParseFloat(os.Getenv("METAROCE_XSK_RATE_SECONDS"), 64); err == nil && s > 0 {
		dur = time.Duration(s * float64(time.Second))
	}
	for _, v := range []struct {
		name     string
		budget   uint32
		threaded bool
		pollRX   bool
	}{
		{"spin, tx budget 256", 256, false, false},
		{"spin, tx budget 32 (kernel default)", 32, false, false},
		{"spin, tx budget 256, threaded napi", 256, true, false},
		{"poll() receiver, tx budget 256", 256, false, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			measureRate(t, Config{TxSkbBudget: v.budget}, v.threaded, v.pollRX, dur)
		})
	}
}

func measureRate(t *testing.T, cfg Config, threaded, pollRX bool, dur time.Duration) {
	const frameLen = 64
	const batch = 64
	a, b := newPair(t, cfg, testnet.LinkConfig{}, 0, false)
	if threaded {
		for _, e := range []*end{a, b} {
			if err := e.host.Port.SetThreadedNAPI(true); err != nil {
				t.Fatalf("threaded napi: %v", err)
			}
		}
	}
	tx, rx := a.sock, b.sock
	// Every sender frame holds the same packet, written once.
	f := a.spec(b, false)
	for i := uint64(0); i < uint64(tx.Pool().Cap()); i++ {
		f.build(tx.FrameBuf(i*uint64(tx.Pool().FrameSize())), 0, frameLen-42)
	}
	if _, err := rx.Refill(rx.Pool().Free()); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var sent, got atomic.Uint64
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { // sender
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pin(0)
		var descs [batch]Desc
		var addrs [batch]uint64
		var n uint64
		for !stop.Load() {
			tx.Complete()
			k := tx.Pool().GetN(addrs[:])
			for i := 0; i < k; i++ {
				descs[i] = Desc{Addr: addrs[i], Len: frameLen}
			}
			q, err := tx.Transmit(descs[:k])
			if err != nil {
				errc <- err
				return
			}
			tx.Pool().PutN(addrs[q:k])
			n += uint64(q)
			sent.Store(n)
		}
	}()
	go func() { // receiver
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pin(1)
		var descs [batch]Desc
		var n uint64
		for !stop.Load() {
			m := rx.Receive(descs[:])
			if m == 0 {
				if pollRX {
					if _, err := rx.Wait(time.Millisecond, false); err != nil {
						errc <- err
						return
					}
				}
				continue
			}
			for _, d := range descs[:m] {
				rx.Pool().Put(d.Addr)
			}
			if _, err := rx.Refill(m); err != nil {
				errc <- err
				return
			}
			n += uint64(m)
			got.Store(n)
		}
	}()

	time.Sleep(300 * time.Millisecond) // warm up
	s0, g0, c0 := sent.Load(), got.Load(), tx.Counters()
	t0 := time.Now()
	time.Sleep(dur)
	s1, g1, c1 := sent.Load(), got.Load(), tx.Counters()
	el := time.Since(t0).Seconds()
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	st, _ := rx.Stats()
	kicks := float64(c1.TxKicks - c0.TxKicks)
	t.Logf("%d-byte frames over %.1fs: sent %.0f kpps, received %.0f kpps (%.1f%% of sent); "+
		"%.0f sendto/s (%.1f frames each, %.0f busy/s); receiver drops: fill empty %d, rx full %d",
		frameLen, el, float64(s1-s0)/el/1e3, float64(g1-g0)/el/1e3, 100*float64(g1-g0)/float64(s1-s0),
		kicks/el, float64(s1-s0)/kicks, float64(c1.TxKickBusy-c0.TxKickBusy)/el,
		st.RxFillRingEmptyDescs, st.RxRingFull)
}

// pin binds the calling (locked) thread to one CPU, modulo the CPUs there
// are, so that sender and receiver never share a core. Without it the
// scheduler sometimes stacks them, and the rate drops to a quarter.
func pin(cpu int) {
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	_ = unix.SchedSetaffinity(0, &set)
}
