package transport_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// TestRecycledWindows: connections that close or fail with their windows
// full (packets in flight, lost, out of order; messages half placed)
// hand those windows to the next connections, which must find them as
// clean as new ones: every later transfer, over the same lossy link, is
// exact. A released connection has no paths but keeps its counters.
func TestRecycledWindows(t *testing.T) {
	link := sim.DefaultLink
	link.Loss, link.Reorder = 0.05, 0.2
	const size = 256 << 10
	p := newPair(t, transport.Config{}, link, 2*size)
	for round := range 12 {
		p.ca, p.cb = nil, nil
		p.connect()
		if round > 0 {
			if s, r := transport.Spares(p.a.EP); s != 0 || r != 0 {
				// The initiator's one released connection went to this one.
				t.Fatalf("round %d: A keeps %d/%d spares after connecting", round, s, r)
			}
		}
		src := pattern(size, byte(round))
		back := make([]byte, size)
		p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: src, RemoteAddr: regionAddr, RKey: p.key})
		p.ca.PostRead(&transport.WorkRequest{WRID: 2, Local: back, RemoteAddr: regionAddr, RKey: p.key})
		// Something in flight when the connection ends, to dirty the
		// windows: a write to the second half, cut short.
		p.ca.PostWrite(&transport.WorkRequest{WRID: 3, Local: src, RemoteAddr: regionAddr + size, RKey: p.key})
		p.kick()
		p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpRead, transport.StatusOK) == round+1 })
		if !bytes.Equal(p.region[:size], src) || !bytes.Equal(back, src) {
			t.Fatalf("round %d: data differs on a connection with recycled windows", round)
		}
		ca := p.ca
		switch round % 3 {
		case 0, 1:
			ca.Close(p.net.Now())
			p.kick()
		case 2:
			// The peer closes it.
			p.cb.Close(p.net.Now())
			p.kick()
		}
		p.runUntil(time.Second, func() bool {
			return ca.State() == transport.StateClosed || ca.State() == transport.StateFailed
		})
		p.idle(10 * time.Millisecond)
		if s, r := transport.Spares(p.a.EP); s != 1 || r != 1 {
			t.Fatalf("round %d: A keeps %d sender and %d receiver windows, want the closed connection's", round, s, r)
		}
		if paths := ca.Paths(nil); len(paths) != 0 {
			t.Fatalf("round %d: a released connection reports %d paths", round, len(paths))
		}
		if a, n := ca.PathCounts(); a != 0 || n != 0 {
			t.Fatalf("round %d: a released connection counts %d of %d paths", round, a, n)
		}
		if st := ca.Stats(); st.BytesSent < size {
			t.Fatalf("round %d: a released connection's counters are gone: %+v", round, st)
		}
	}
}

// BenchmarkConnChurn is a lazy collective's life of a connection: connect,
// one 4 KiB WRITE, close, with the simulator's fabric configuration (22 KB
// of windows per end), two endpoints passing packets directly. One op is
// one connection; "fresh" turns the endpoint's spares off, the baseline
// for B/op and ns/op.
func BenchmarkConnChurn(b *testing.B) {
	for _, mode := range []string{"recycled", "fresh"} {
		b.Run(mode, func(b *testing.B) {
			cfg := sim.FabricTransport
			cfg.Seed = 1
			ea, err := transport.NewEndpoint(cfg, addrA)
			if err != nil {
				b.Fatal(err)
			}
			cfg.Seed = 2
			eb, _ := transport.NewEndpoint(cfg, addrB)
			if mode == "fresh" {
				transport.NoSpares(ea)
				transport.NoSpares(eb)
			}
			mem := transport.NewMemoryTable()
			mem.Add(&transport.Region{Key: 3, Buf: make([]byte, 4096), Access: transport.AccessRemoteWrite})
			eb.Listen(1, mem)
			src := make([]byte, 4096)
			buf := make([]byte, ea.MaxPacket())
			cq := make([]transport.Completion, 16)
			var now transport.Time
			// pump moves packets both ways, and runs the next timer when
			// none is owed, until A has reported a completion of op; it
			// returns that completion's connection.
			pump := func(op transport.Op) *transport.Conn {
				for range 10_000 {
					for _, p := range [...]struct {
						from, to *transport.Endpoint
						src      netip.Addr
					}{{ea, eb, addrA}, {eb, ea, addrB}} {
						for {
							d, ok := p.from.Transmit(now, buf)
							if !ok {
								break
							}
							now += 100
							p.to.Receive(now, p.src, false, buf[:d.Len])
						}
					}
					for eb.PollCompletions(cq) > 0 {
					}
					var c *transport.Conn
					for k := ea.PollCompletions(cq); k > 0; k = ea.PollCompletions(cq) {
						for _, e := range cq[:k] {
							if e.Op == op {
								c = e.Conn
							}
						}
					}
					if c != nil {
						return c
					}
					if ea.HasOutput() || eb.HasOutput() {
						continue
					}
					t := min(ea.NextTimeout(), eb.NextTimeout())
					if t == transport.Never {
						break
					}
					now = max(now, t)
					ea.Timeout(now)
					eb.Timeout(now)
				}
				b.Fatalf("no completion %v", op)
				return nil
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ea.Connect(now, addrB, 1, transport.NewMemoryTable()); err != nil {
					b.Fatal(err)
				}
				c := pump(transport.OpConnected)
				if err := c.PostWrite(&transport.WorkRequest{Local: src, RKey: 3}); err != nil {
					b.Fatal(err)
				}
				pump(transport.OpWrite)
				c.Close(now)
				pump(transport.OpClosed)
			}
		})
	}
}
