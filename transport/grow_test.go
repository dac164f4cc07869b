package transport_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// TestTablesGrowToTheirWindows fills every table that starts small and
// grows (grow.go) to its window at once: the receive queue to RecvQueue
// buffers, the send side to MsgWindow messages (WRITEs of several
// packets, SENDs and READs over four streams, so packet records, messages,
// receive buffers and the responder's READ jobs all grow while others are
// live). Exactly the window is accepted, the next post is refused as
// before, and every message completes with its bytes where they belong.
func TestTablesGrowToTheirWindows(t *testing.T) {
	cfg := transport.Config{MsgWindow: 256, RecvQueue: 256}
	const wlen, slen, rlen = 3000, 100, 2000
	p := newPair(t, cfg, sim.DefaultLink, 2<<20)
	p.connect()
	copy(p.region[1<<20:], pattern(1<<20, 7))

	recvBufs := make([][]byte, 256)
	for i := range recvBufs {
		recvBufs[i] = make([]byte, slen)
		if err := p.cb.PostRecv(uint64(i), recvBufs[i]); err != nil {
			t.Fatalf("receive buffer %d: %v", i, err)
		}
	}
	if err := p.cb.PostRecv(999, make([]byte, slen)); !errors.Is(err, transport.ErrRecvQueueFull) {
		t.Fatalf("receive buffer 257: %v, want ErrRecvQueueFull", err)
	}

	local := make([][]byte, 256)
	var sends [][]byte
	for i := range 256 {
		wr := &transport.WorkRequest{WRID: uint64(i), Stream: uint16(i % 4), RKey: p.key}
		var err error
		switch i % 3 {
		case 0:
			wr.Local = pattern(wlen, byte(i))
			wr.RemoteAddr = regionAddr + uint64(i)*4096
			err = p.ca.PostWrite(wr)
		case 1:
			wr.Local = pattern(slen, byte(i))
			sends = append(sends, wr.Local)
			err = p.ca.PostSend(wr)
		default:
			local[i] = make([]byte, rlen)
			wr.Local = local[i]
			wr.RemoteAddr = regionAddr + 1<<20 + uint64(i)*4096
			err = p.ca.PostRead(wr)
		}
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := p.ca.PostWrite(&transport.WorkRequest{WRID: 999, Local: make([]byte, 8), RemoteAddr: regionAddr, RKey: p.key}); !errors.Is(err, transport.ErrQueueFull) {
		t.Fatalf("message 257: %v, want ErrQueueFull", err)
	}
	p.kick()
	done := func() int {
		return count(p.cqA, transport.OpWrite, transport.StatusOK) + count(p.cqA, transport.OpSend, transport.StatusOK) +
			count(p.cqA, transport.OpRead, transport.StatusOK)
	}
	p.runUntil(2*time.Second, func() bool { return done() == 256 && count(p.cqB, transport.OpRecv, transport.StatusOK) == len(sends) })
	if n := done(); n != 256 {
		t.Fatalf("%d of 256 messages completed OK: %v", n, p.cqA)
	}
	for i := 0; i < 256; i += 3 {
		if got := p.region[i*4096 : i*4096+wlen]; !bytes.Equal(got, pattern(wlen, byte(i))) {
			t.Fatalf("WRITE %d: wrong bytes at its offset", i)
		}
	}
	for i := 2; i < 256; i += 3 {
		off := 1<<20 + i*4096
		if !bytes.Equal(local[i], p.region[off:off+rlen]) {
			t.Fatalf("READ %d: wrong bytes", i)
		}
	}
	// SENDs take receive buffers in posting order.
	k := 0
	for _, c := range p.cqB {
		if c.Op != transport.OpRecv {
			continue
		}
		if c.WRID >= uint64(len(sends)) || !bytes.Equal(recvBufs[c.WRID], sends[c.WRID]) {
			t.Fatalf("receive %d (wrid %d): wrong bytes", k, c.WRID)
		}
		k++
	}
	if k != len(sends) {
		t.Fatalf("%d receives, want %d", k, len(sends))
	}
}

// TestConnectionMemoryFollowsUse: a connection that carries one message
// at a time holds tables for a few messages, not for its whole windows
// (177 KB a connection end with the defaults before they grew on demand;
// 10,000 idle connections held 1.2 GB in a daemon).
func TestConnectionMemoryFollowsUse(t *testing.T) {
	const n = 200
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	conns := p.connectMany(n)
	src := pattern(64, 3)
	for i, c := range conns {
		if err := c.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: src, RemoteAddr: regionAddr + uint64(i)*64, RKey: p.key}); err != nil {
			t.Fatal(err)
		}
	}
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpWrite, transport.StatusOK) == n })
	if got := count(p.cqA, transport.OpWrite, transport.StatusOK); got != n {
		t.Fatalf("%d of %d WRITEs completed", got, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	perEnd := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / (2 * n)
	t.Logf("%d connections, one WRITE each: %d bytes of heap per connection end", n, perEnd)
	if perEnd > 64<<10 {
		t.Fatalf("%d bytes of heap per connection end, want under 64 KiB", perEnd)
	}
	runtime.KeepAlive(p)
}
