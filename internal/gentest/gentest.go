// Package gentest is an in-process traffic driver for dataplane tests: a
// Writer that posts RDMA WRITEs with immediate data, and a Target on
// another endpoint that checks every byte of every message when its
// immediate arrives. Both are dataplane.Drivers an engine runs directly,
// with no daemon, control socket or client library in between, so the
// tests of the engine, its links and telemetry can move verified traffic
// over real or in-memory links on their own.
//
// It is not part of metaroced: the daemon has no traffic source of its
// own, and its traffic comes from applications (client/, `metaroce
// perf`).
//
// Message i's content is the slice of a shared pseudo-random block at an
// offset derived from i, so both ends know it without sending it twice,
// a misplaced or stale message is caught, and neither end spends CPU
// generating random bytes per message.
package gentest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/transport"
)

// Service is the service id the Target listens on.
const Service = 0x6d657461 // "meta"

// Config describes a run; both ends must agree on Size, Slots and Seed.
type Config struct {
	Size  int    // bytes per message
	Slots int    // messages in flight; the target's region holds Slots messages
	Seed  uint64 // content seed
	// Writer only:
	Peer     netip.Addr
	Messages int // messages to write
	Streams  int
}

const regionAddr = 0x6d0000000000

type block struct {
	data []byte
	span int
}

func newBlock(cfg *Config) *block {
	span := 1 << 20
	b := &block{data: make([]byte, span+cfg.Size), span: span}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5bd1e995))
	for i := 0; i+8 <= len(b.data); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8; k++ {
			b.data[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// content is message i's bytes.
func (b *block) content(i uint32, size int) []byte {
	off := int((uint64(i)*2654435761 + 17) % uint64(b.span))
	return b.data[off : off+size]
}

// Result is what a Writer's run measured.
type Result struct {
	Messages  int
	Completed int
	Failed    int
	Bytes     int64
	Elapsed   time.Duration
	Gbps      float64
	Err       string
}

// Writer is the active end: a Driver that connects to the target and
// writes.
type Writer struct {
	cfg      Config
	block    *block
	conn     *transport.Conn
	started  bool
	next     int
	inflight int
	busy     []bool // a slot's message is in flight
	start    transport.Time
	res      Result
	done     chan Result
	finished bool
}

// NewWriter returns a writer; its result arrives on Done.
func NewWriter(cfg Config) (*Writer, error) {
	if cfg.Size <= 0 || cfg.Messages <= 0 || !cfg.Peer.IsValid() {
		return nil, errors.New("gentest: size, messages and peer are required")
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 1
	}
	w := &Writer{cfg: cfg, block: newBlock(&cfg), done: make(chan Result, 1),
		busy: make([]bool, cfg.Slots)}
	w.res.Messages = cfg.Messages
	return w, nil
}

// Done delivers the result once the run ends.
func (w *Writer) Done() <-chan Result { return w.done }

func (w *Writer) Step(e *dataplane.Engine, now transport.Time) bool {
	if !w.started {
		w.started = true
		if _, err := e.Endpoint().Connect(now, w.cfg.Peer, Service, transport.NewMemoryTable()); err != nil {
			w.finish(now, err)
		}
		return true
	}
	if w.conn == nil || w.finished {
		return false
	}
	work := false
	for w.inflight < w.cfg.Slots && w.next < w.cfg.Messages {
		i := w.next
		slot := i % w.cfg.Slots
		if w.busy[slot] {
			break // message i-Slots still owns the target's slot
		}
		wr := transport.WorkRequest{WRID: uint64(i), Stream: uint16(i % w.cfg.Streams),
			Local: w.block.content(uint32(i), w.cfg.Size), RemoteAddr: regionAddr + uint64(slot*w.cfg.Size),
			RKey: regionKey(w.cfg.Seed), Imm: uint32(i), HasImm: true}
		if err := w.conn.PostWrite(&wr); err != nil {
			if errors.Is(err, transport.ErrQueueFull) {
				break
			}
			w.finish(now, err)
			return true
		}
		w.busy[slot] = true
		w.next++
		w.inflight++
		work = true
	}
	return work
}

func (w *Writer) Completion(e *dataplane.Engine, now transport.Time, c transport.Completion) {
	switch c.Op {
	case transport.OpConnected:
		w.conn = c.Conn
		w.start = now
	case transport.OpClosed:
		if !w.finished {
			w.finish(now, fmt.Errorf("connection closed: %v: %v", c.Status, c.Conn.Err))
		}
	case transport.OpWrite:
		w.inflight--
		w.busy[int(c.WRID)%w.cfg.Slots] = false
		if c.Status != transport.StatusOK {
			w.res.Failed++
		} else {
			w.res.Completed++
			w.res.Bytes += int64(c.Bytes)
		}
		if w.res.Completed+w.res.Failed == w.cfg.Messages {
			w.finish(now, nil)
		}
	}
}

func (w *Writer) finish(now transport.Time, err error) {
	if w.finished {
		return
	}
	w.finished = true
	if w.conn != nil && w.conn.State() == transport.StateEstablished {
		w.conn.Close(now) // one connection per run: leave nothing behind
	}
	w.res.Elapsed = time.Duration(now - w.start)
	if w.res.Elapsed > 0 {
		w.res.Gbps = float64(w.res.Bytes*8) / float64(w.res.Elapsed)
	}
	if err != nil {
		w.res.Err = err.Error()
	}
	w.done <- w.res
}

func regionKey(seed uint64) uint32 { return uint32(seed*0x9e3779b9) | 1 }

// TargetStats is what a target saw.
type TargetStats struct {
	Verified   int
	Corrupt    int
	Duplicates int
	Bytes      int64
}

// Target is the passive end: it registers a region for the writer and
// verifies each message when its immediate arrives.
type Target struct {
	cfg    Config
	block  *block
	region []byte
	seen   []uint64
	stats  TargetStats
	// Report, if set, receives a copy of the stats after each message
	// (on the engine goroutine).
	Report func(TargetStats)
}

// NewTarget makes a target and registers its region and service on ep.
func NewTarget(cfg Config, ep *transport.Endpoint) *Target {
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	t := &Target{cfg: cfg, block: newBlock(&cfg), region: make([]byte, cfg.Slots*cfg.Size)}
	mem := transport.NewMemoryTable()
	mem.Add(&transport.Region{Key: regionKey(cfg.Seed), Addr: regionAddr, Buf: t.region,
		Access: transport.AccessRemoteWrite | transport.AccessLocalWrite})
	ep.Listen(Service, mem)
	return t
}

func (t *Target) Step(e *dataplane.Engine, now transport.Time) bool { return false }

func (t *Target) Completion(e *dataplane.Engine, now transport.Time, c transport.Completion) {
	if c.Op != transport.OpRecvWriteImm || c.Status != transport.StatusOK {
		return
	}
	i := c.Imm
	w, bit := int(i/64), uint64(1)<<(i%64)
	for w >= len(t.seen) {
		t.seen = append(t.seen, 0)
	}
	if t.seen[w]&bit != 0 {
		t.stats.Duplicates++
		return
	}
	t.seen[w] |= bit
	slot := int(i) % t.cfg.Slots
	got := t.region[slot*t.cfg.Size : (slot+1)*t.cfg.Size]
	if c.Bytes == t.cfg.Size && bytes.Equal(got, t.block.content(i, t.cfg.Size)) {
		t.stats.Verified++
		t.stats.Bytes += int64(c.Bytes)
	} else {
		t.stats.Corrupt++
	}
	if t.Report != nil {
		t.Report(t.stats)
	}
}

// Stats returns the counts (call on the engine goroutine, or after Run).
func (t *Target) Stats() TargetStats { return t.stats }
