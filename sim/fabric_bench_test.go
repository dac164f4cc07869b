package sim

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
)

// BenchmarkFabricEventLoop measures one event of a loaded fabric: 32
// hosts on a leaf-spine fabric, each keeping a 1 MiB WRITE in flight to
// its permutation peer (a new one posted as each completes), so the
// events are the steady mix of NIC, switch, delivery and timer events.
// One op is one event; allocs/op must be 0: packet buffers come from the
// network's free list, events are values in its queue's slices, and the
// transport builds packets into the buffer it is handed.
func BenchmarkFabricEventLoop(b *testing.B) {
	f, err := NewFabric(ClosConfig{Tiers: 2, Hosts: 32, Planes: 1, Oversub: 1, HostBps: 100e9, FabricBps: 100e9,
		HostDelay: 1000, FabricDelay: 1000, QueueBytes: 512 << 10, ECNBytes: 100_000, Seed: 1}, withCC(FabricTransport))
	if err != nil {
		b.Fatal(err)
	}
	const size = 1 << 20
	src := make([]byte, size)
	mem := transport.NewMemoryTable()
	mem.Add(&transport.Region{Key: fabricKey, Addr: fabricAddr, Buf: make([]byte, size), Access: transport.AccessRemoteWrite})
	n := len(f.Hosts)
	wr := make([]transport.WorkRequest, n)
	for i, h := range f.Hosts {
		h.EP.Listen(service, mem)
		wr[i] = transport.WorkRequest{WRID: uint64(i), Local: src, RemoteAddr: fabricAddr, RKey: fabricKey}
		h.OnCompletion = func(_ Time, c transport.Completion) {
			switch c.Op {
			case transport.OpConnected, transport.OpWrite:
				if c.Conn.Peer() == f.Hosts[(i+n/2)%n].Addr {
					if err := c.Conn.PostWrite(&wr[i]); err != nil {
						b.Error(err)
					}
				}
			}
		}
		if _, err := h.EP.Connect(0, f.Hosts[(i+n/2)%n].Addr, service, mem); err != nil {
			b.Fatal(err)
		}
		h.Kick()
	}
	// Warm up: connections up, windows open, buffers and heaps grown.
	f.Net.Run(Time(1_000_000), nil)
	b.ReportAllocs()
	b.ResetTimer()
	start := f.Net.Events
	f.Net.Run(Time(1<<62), func() bool { return f.Net.Events-start >= uint64(b.N) })
}

func withCC(tc transport.Config) transport.Config {
	tc.Congestion = DefaultCC(tc.Mode)
	return tc
}
