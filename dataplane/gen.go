package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// The built-in traffic generator exercises the daemon end to end until
// applications drive it through the client API: a Writer posts RDMA
// WRITEs with immediate data to a Target on another host, which checks
// every byte of every message when its immediate arrives.
//
// Message i's content is the slice of a shared pseudo-random block at an
// offset derived from i, so both ends know it without sending it twice,
// a misplaced or stale message is caught, and neither end spends CPU
// generating random bytes per message.

// GenService is the service id the generator's target listens on.
const GenService = 0x6d657461 // "meta"

// GenConfig describes a generator run; both ends must agree on Size,
// Slots and Seed.
type GenConfig struct {
	Size  int    // bytes per message
	Slots int    // messages in flight; the target's region holds Slots messages
	Seed  uint64 // content seed
	// Writer only:
	Peer     netip.Addr
	Messages int // messages to write (bandwidth mode)
	Streams  int
	// Latency mode: Outstanding 1, Messages round trips.
	Latency bool
}

const genRegionAddr = 0x6d0000000000

type genBlock struct {
	data []byte
	span int
}

func newGenBlock(cfg *GenConfig) *genBlock {
	span := 1 << 20
	b := &genBlock{data: make([]byte, span+cfg.Size), span: span}
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
func (b *genBlock) content(i uint32, size int) []byte {
	off := int((uint64(i)*2654435761 + 17) % uint64(b.span))
	return b.data[off : off+size]
}

// GenResult is what a generator run measured.
type GenResult struct {
	Messages  int           `json:"messages"`
	Completed int           `json:"completed"`
	Failed    int           `json:"failed"`
	Bytes     int64         `json:"bytes"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	Gbps      float64       `json:"goodput_gbps"`
	LatP50us  float64       `json:"lat_p50_us,omitempty"`
	LatP99us  float64       `json:"lat_p99_us,omitempty"`
	Err       string        `json:"error,omitempty"`
}

// Writer is the active end: a Driver that connects to the target and
// writes.
type Writer struct {
	cfg      GenConfig
	block    *genBlock
	conn     *transport.Conn
	started  bool
	next     int
	inflight int
	posted   []transport.Time
	busy     []bool // a slot's message is in flight
	lat      []float64
	start    transport.Time
	res      GenResult
	done     chan GenResult
	finished bool
	// Latency, if set, receives each successful write's completion
	// latency (post to completion). It is owned by the engine goroutine
	// like the writer; the daemon keeps one per engine across runs, for
	// telemetry to copy on scrape.
	Latency *transport.Histogram
}

// NewWriter returns a writer; its result arrives on Done.
func NewWriter(cfg GenConfig) (*Writer, error) {
	if cfg.Size <= 0 || cfg.Messages <= 0 || !cfg.Peer.IsValid() {
		return nil, errors.New("generator: size, messages and peer are required")
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 1
	}
	w := &Writer{cfg: cfg, block: newGenBlock(&cfg), done: make(chan GenResult, 1),
		posted: make([]transport.Time, cfg.Messages), busy: make([]bool, cfg.Slots)}
	w.res.Messages = cfg.Messages
	if cfg.Latency {
		w.lat = make([]float64, 0, cfg.Messages)
	}
	return w, nil
}

// Done delivers the result once the run ends.
func (w *Writer) Done() <-chan GenResult { return w.done }

func (w *Writer) Step(e *Engine, now transport.Time) bool {
	if !w.started {
		w.started = true
		if _, err := e.Endpoint().Connect(now, w.cfg.Peer, GenService, transport.NewMemoryTable()); err != nil {
			w.finish(now, err)
		}
		return true
	}
	if w.conn == nil || w.finished {
		return false
	}
	limit := w.cfg.Slots
	if w.cfg.Latency {
		limit = 1
	}
	work := false
	for w.inflight < limit && w.next < w.cfg.Messages {
		i := w.next
		slot := i % w.cfg.Slots
		if w.busy[slot] {
			break // message i-Slots still owns the target's slot
		}
		wr := transport.WorkRequest{WRID: uint64(i), Stream: uint16(i % w.cfg.Streams),
			Local: w.block.content(uint32(i), w.cfg.Size), RemoteAddr: genRegionAddr + uint64(slot*w.cfg.Size),
			RKey: genKey(w.cfg.Seed), Imm: uint32(i), HasImm: true}
		if err := w.conn.PostWrite(&wr); err != nil {
			if errors.Is(err, transport.ErrQueueFull) {
				break
			}
			w.finish(now, err)
			return true
		}
		w.posted[i] = now
		w.busy[slot] = true
		w.next++
		w.inflight++
		work = true
	}
	return work
}

func (w *Writer) Completion(e *Engine, now transport.Time, c transport.Completion) {
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
			if w.Latency != nil {
				w.Latency.Observe(transport.Duration(now - w.posted[c.WRID]))
			}
			if w.lat != nil {
				w.lat = append(w.lat, float64(now-w.posted[c.WRID])/1e3)
			}
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
	if len(w.lat) > 0 {
		slices.Sort(w.lat)
		w.res.LatP50us = w.lat[len(w.lat)/2]
		w.res.LatP99us = w.lat[len(w.lat)*99/100]
	}
	if err != nil {
		w.res.Err = err.Error()
	}
	w.done <- w.res
}

func genKey(seed uint64) uint32 { return uint32(seed*0x9e3779b9) | 1 }

// TargetStats is what a target saw.
type TargetStats struct {
	Verified   int   `json:"verified"`
	Corrupt    int   `json:"corrupt"`
	Duplicates int   `json:"duplicates"`
	Bytes      int64 `json:"bytes_verified"`
}

// Target is the passive end: it registers a region for the writer and
// verifies each message when its immediate arrives.
type Target struct {
	cfg    GenConfig
	block  *genBlock
	region []byte
	seen   []uint64
	stats  TargetStats
	// Report, if set, receives a copy of the stats after each message
	// (on the engine goroutine).
	Report func(TargetStats)
}

// NewTarget makes a target and registers its region and service on ep.
func NewTarget(cfg GenConfig, ep *transport.Endpoint) *Target {
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	t := &Target{cfg: cfg, block: newGenBlock(&cfg), region: make([]byte, cfg.Slots*cfg.Size)}
	mem := transport.NewMemoryTable()
	mem.Add(&transport.Region{Key: genKey(cfg.Seed), Addr: genRegionAddr, Buf: t.region,
		Access: transport.AccessRemoteWrite | transport.AccessLocalWrite})
	ep.Listen(GenService, mem)
	return t
}

func (t *Target) Step(e *Engine, now transport.Time) bool { return false }

func (t *Target) Completion(e *Engine, now transport.Time, c transport.Completion) {
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
