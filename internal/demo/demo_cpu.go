package demo

import (
	"sync"
	"time"

	"github.com/metaroce/metaroce/internal/daemon"
)

// EngineCPU is what an engine's thread spent per packet during the
// bandwidth test: CPU time (on-CPU, internal/threadcpu) over the packets
// it sent (the writer's engine) or received (the target's), between the
// first and the last status sample in which its count moved, so the
// perf processes' start-up and tail are left out. KernelShare is the
// part of that time in the kernel: on copy-mode veth a sender's transmit
// call carries its packets through the switch namespace and into the
// receiving socket, the whole of what the raw baseline's sender does
// (RawSenderCPUNsPerFrame), so the rest is what the transport adds.
type EngineCPU struct {
	NsPerPacket float64 `json:"ns_per_packet"`
	KernelShare float64 `json:"kernel_share"`
	Packets     uint64  `json:"packets"`
	Seconds     float64 `json:"seconds"` // the window's length
}

// cpuEvery is how often the bandwidth test's engines are sampled: a
// status call costs the engine one closure run, and a window of 50 ms
// holds thousands of packets even at MTU 9000.
const cpuEvery = 50 * time.Millisecond

// cpuSample is one status reading of an engine.
type cpuSample struct {
	packets   uint64
	cpu, user uint64 // ns
	sys       uint64
	at        time.Time
}

// cpuSampler polls a daemon's status every interval until stopped and
// keeps its first engine's CPU and packet count (tx or rx).
type cpuSampler struct {
	stop    chan struct{}
	done    sync.WaitGroup
	samples []cpuSample
}

func sampleCPU(c *daemon.Client, tx bool, every time.Duration) *cpuSampler {
	s := &cpuSampler{stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if st, err := c.Do(daemon.Request{Op: "status"}); err == nil && len(st.Engines) > 0 && st.Engines[0].CPU != nil {
				e := st.Engines[0]
				p := e.RxPackets
				if tx {
					p = e.TxPackets
				}
				s.samples = append(s.samples, cpuSample{packets: p, cpu: e.CPU.Nanos, user: e.CPU.UserNanos, sys: e.CPU.SysNanos, at: time.Now()})
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// result stops the sampler and returns the engine's CPU per packet over
// the samples where its count moved (nil if it moved in fewer than two
// intervals).
func (s *cpuSampler) result() *EngineCPU {
	close(s.stop)
	s.done.Wait()
	return cpuWindow(s.samples)
}

// cpuWindow is result's arithmetic: from the sample before the count's
// first move to the sample that ends its last move.
func cpuWindow(ss []cpuSample) *EngineCPU {
	first, last := -1, -1
	for i := 1; i < len(ss); i++ {
		if ss[i].packets > ss[i-1].packets {
			if first < 0 {
				first = i - 1
			}
			last = i
		}
	}
	if first < 0 || last-first < 2 {
		return nil
	}
	a, b := ss[first], ss[last]
	r := &EngineCPU{Packets: b.packets - a.packets, Seconds: b.at.Sub(a.at).Seconds()}
	r.NsPerPacket = float64(b.cpu-a.cpu) / float64(r.Packets)
	if u, k := b.user-a.user, b.sys-a.sys; u+k > 0 {
		r.KernelShare = float64(k) / float64(u+k)
	}
	return r
}
