package dataplane

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// MemLink is the in-memory twin of a real link, for tests: two MemLinks
// made by NewMemPair deliver each other's packets through a locked queue,
// with optional random loss. It keeps the Link contract (batches, frame
// ownership until Release) so engine tests exercise the same code paths
// as the AF_XDP and UDP backends. Its lock is fine here: it stands in for
// the kernel, not for the engine.
type MemLink struct {
	local netip.Addr
	peer  *MemLink
	mu    sync.Mutex
	queue [][]byte // received, not yet taken
	free  [][]byte
	wake  chan struct{}
	loss  float64
	rng   *rand.Rand
	size  int
}

// NewMemPair returns two connected links for addresses a and b; each drops
// a sent packet with probability loss.
func NewMemPair(a, b netip.Addr, frameSize int, loss float64, seed uint64) (*MemLink, *MemLink) {
	mk := func(addr netip.Addr, s uint64) *MemLink {
		return &MemLink{local: addr, wake: make(chan struct{}, 1), loss: loss,
			rng: rand.New(rand.NewPCG(s, s+1)), size: frameSize}
	}
	x, y := mk(a, seed), mk(b, seed+7)
	x.peer, y.peer = y, x
	return x, y
}

func (l *MemLink) Receive(batch []RxPacket) int {
	l.mu.Lock()
	n := 0
	for n < len(batch) && len(l.queue) > 0 {
		b := l.queue[0]
		l.queue = l.queue[1:]
		batch[n] = RxPacket{Payload: b, From: l.peer.local}
		n++
	}
	l.mu.Unlock()
	return n
}

func (l *MemLink) Release(batch []RxPacket) {
	l.mu.Lock()
	for i := range batch {
		l.free = append(l.free, batch[i].Payload[:cap(batch[i].Payload)])
		batch[i].Payload = nil
	}
	l.mu.Unlock()
}

// ReserveTx hands out the frames the peer has released (what this link
// sent ends up there), new ones only when none are free: a buffer
// allocated per packet cost an engine test's sender about 4 us a packet
// in fresh memory (docs/platform.md, "Page faults"), which its stamps then
// measured as hand-off lag.
func (l *MemLink) ReserveTx(batch []TxPacket) int {
	p := l.peer
	p.mu.Lock()
	for i := range batch {
		var b []byte
		if n := len(p.free); n > 0 {
			b, p.free = p.free[n-1], p.free[:n-1]
		} else {
			b = make([]byte, l.size)
		}
		batch[i] = TxPacket{Buf: b}
	}
	p.mu.Unlock()
	return len(batch)
}

func (l *MemLink) SubmitTx(batch []TxPacket) error {
	p := l.peer
	p.mu.Lock()
	for i := range batch {
		if batch[i].Len == 0 {
			continue
		}
		if l.loss > 0 && l.rng.Float64() < l.loss {
			continue
		}
		p.queue = append(p.queue, batch[i].Buf[:batch[i].Len])
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

func (l *MemLink) Poll(timeout time.Duration) error {
	l.mu.Lock()
	ready := len(l.queue) > 0
	l.mu.Unlock()
	if ready {
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-l.wake:
	case <-t.C:
	}
	return nil
}

func (l *MemLink) Info() LinkInfo { return LinkInfo{Backend: "mem"} }
func (l *MemLink) Close() error   { return nil }
