package sim

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// ConnStateBytes measures what one established connection end costs in
// heap bytes under tc: two hosts on a direct link open conns connections,
// each writes one message of four packets per path (so every path has
// carried data and the receiver holds its per-path ack state), and the
// heap growth from before the first Connect to after the last write,
// once garbage is collected, is divided by 2 x conns (each connection
// has an end on either host). It is a measurement, not a sum
// of field sizes: it counts every slice the transport sizes from tc, the
// congestion controller, map entries and allocator rounding
// (docs/scale.md).
func ConnStateBytes(tc transport.Config, conns int) (float64, error) {
	n := New(1)
	tc.Seed = 7
	tc.ResetRate = 1 << 20 // every CONNECT gets its challenge
	a, err := n.AddHost(netip.MustParseAddr("10.0.0.1"), tc, 100e9)
	if err != nil {
		return 0, err
	}
	tc.Seed = 8
	b, err := n.AddHost(netip.MustParseAddr("10.0.0.2"), tc, 100e9)
	if err != nil {
		return 0, err
	}
	n.Connect(a, b, LinkConfig{Delay: time.Microsecond})
	n.Connect(b, a, LinkConfig{Delay: time.Microsecond})
	memA, memB := transport.NewMemoryTable(), transport.NewMemoryTable()
	cfg := a.EP.Config()
	size := 4 * cfg.Paths * cfg.MaxPayload()
	memB.Add(&transport.Region{Key: fabricKey, Addr: fabricAddr, Buf: make([]byte, size), Access: transport.AccessRemoteWrite})
	src := make([]byte, size)
	b.EP.Listen(service, memB)
	up, done := 0, 0
	count := func(_ Time, c transport.Completion) {
		switch c.Op {
		case transport.OpConnected:
			up++
			if c.Conn.Peer() == b.Addr {
				if err := c.Conn.PostWrite(&transport.WorkRequest{Local: src, RemoteAddr: fabricAddr, RKey: fabricKey}); err != nil {
					done = -1 << 30
				}
			}
		case transport.OpWrite:
			done++
		}
	}
	a.OnCompletion, b.OnCompletion = count, count
	// Warm the network's packet buffers and event heap first, so the
	// measurement is the connections' and nothing else.
	n.Run(Time(time.Microsecond), nil)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range conns {
		if _, err := a.EP.Connect(n.Now(), b.Addr, service, memA); err != nil {
			return 0, err
		}
	}
	a.Kick()
	n.Run(Time(time.Second), func() bool { return up == 2*conns && done == conns })
	if up != 2*conns || done != conns {
		return 0, fmt.Errorf("sim: %d of %d connection ends up, %d of %d writes done", up, 2*conns, done, conns)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(n)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(2*conns), nil
}
