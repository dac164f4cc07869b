package congestion

import (
	"testing"
	"time"
)

// The per-ack cost of each algorithm: the fast loop the engine runs for
// every ack. RTTs hover around the target and one ack in 8 is marked, so
// the increase, the cut and the once-per-RTT window all run.
func BenchmarkOnAck(b *testing.B) {
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			cc, err := New(name, Config{MSS: 4096, LineRate: 100e9, BaseRTT: 10 * time.Microsecond})
			if err != nil {
				b.Fatal(err)
			}
			s := AckSample{Bytes: 4096, InFlight: 64 << 10}
			now := Time(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += 300
				s.RTT = time.Duration(12000 + (i&15)*500)
				s.Marked = 0
				if i&7 == 0 {
					s.Marked = 4096
				}
				s.RateHint = uint64(i&1) * 20e9
				cc.OnSent(now, 4096)
				cc.OnAck(now, s)
				_ = cc.Window()
				_ = cc.PacingRate()
			}
		})
	}
}

// FairShare's per-packet update at a receiver with 32 and 1024 active
// senders.
func BenchmarkFairShareObserve(b *testing.B) {
	for _, n := range []int{32, 1024} {
		for _, aware := range []bool{false, true} {
			name := "equal"
			if aware {
				name = "water-fill"
			}
			b.Run(name+"/"+itoa(n), func(b *testing.B) {
				f := newFS(b, FairShareConfig{MaxSenders: n, DemandAware: aware})
				now := Time(0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					now += 40 // a 4 KB packet every 40 ns: 800 Gb/s of arrivals
					f.Observe(now, uint64(i%n)*0x9e37, 4096)
				}
			})
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
