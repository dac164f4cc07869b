package transport_test

import "testing"

// TestEndpointNoAllocs holds the hot path's promise: once a connection is
// in steady state, a round of the sender (receive acks, take completions,
// post, fire timers, transmit data) and of the receiver (receive and
// place data, fire timers, transmit acks) allocates nothing, at the
// default MTU and with 8 KiB payloads.
func TestEndpointNoAllocs(t *testing.T) {
	for _, c := range []struct {
		mtu int
		sgl bool
	}{{0, false}, {8192 + 116, false}, {0, true}} {
		mtu := c.mtu
		l := newLoopMTU(t, mtu)
		if c.sgl {
			// A gather list of four uneven pieces: packets cut across
			// their boundaries gather from two.
			l.sgl = [][]byte{l.src[:1000], l.src[1000:1001], l.src[1001:40000], l.src[40000:]}
		}
		for range 100 {
			l.sendSide()
			l.recvSide()
		}
		moved := 0
		round := func() {
			l.sendSide()
			moved += l.nd
			l.recvSide()
		}
		if n := testing.AllocsPerRun(500, round); n != 0 {
			t.Errorf("MTU %d, gather list %v: a round of both endpoints allocates %.1f times (Receive, Transmit, Timeout, PollCompletions, PostWrite)", mtu, c.sgl, n)
		}
		if moved < 500 {
			t.Fatalf("MTU %d: %d data packets in 501 rounds: not a steady state", mtu, moved)
		}
	}
}

// BenchmarkEngineSend8K and BenchmarkEngineReceive8K: the same per-packet
// costs with 8 KiB payloads (MTU 8308), where the copy and the CRC grow
// and the per-packet work does not.
func BenchmarkEngineSend8K(b *testing.B)    { benchSideMTU(b, true, 8192+116) }
func BenchmarkEngineReceive8K(b *testing.B) { benchSideMTU(b, false, 8192+116) }
