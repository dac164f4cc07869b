package perf

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
)

// How a run proves its data, message by message.
//
// Memory is cut into slots of one stride (the run's largest message).
// The writer (the write-bw client) keeps L local slots per queue pair,
// each filled once with its own pattern, and sends message i from slot
// i mod L with the message's index stamped in its first 8 bytes; it reuses
// a slot only after the message that used it last has completed, so the
// bytes in flight never change (the window is held to L-1). The target
// (the write-bw server) has R slots per queue pair and message i lands in
// slot i mod R; each WRITE carries its index as immediate data, so the
// target checks every message where and when it lands: the stamped index
// and every other byte against the writer's pattern. When R is smaller
// than the run (R is capped by memory), a later message j = i + kR may
// already have overwritten slot i mod R when i's completion is read: then
// the slot must hold message j intact, and i is counted superseded, not
// verified. With the default sizes R covers the whole run and every
// message is verified at its own offset.
//
// read-bw turns it round: the server fills R slots with their patterns,
// and the client READs slot i mod R into local slot i mod L, which it
// zeroes before posting, and compares on completion, so a READ that
// places nothing, or places the wrong bytes, fails.

// slotBudget bounds a side's memory per run: slots x stride x queue pairs.
const slotBudget = 512 << 20

// geometry is the slot layout both sides derive from the same flags.
type geometry struct {
	stride int // bytes per slot: the largest message
	local  int // L: the writer's (or reader's) slots per queue pair
	remote int // R: the target's slots per queue pair
	depth  int // requests outstanding per queue pair, at most L-1
}

func newGeometry(o perfOpts) geometry {
	g := geometry{stride: o.maxSize()}
	fit := max(2, slotBudget/(g.stride*o.qps))
	g.local = min(o.depth+1, fit)
	g.depth = min(o.depth, g.local-1)
	switch o.test {
	case "write-bw":
		g.remote = min(max(o.iters, 1), fit)
	case "read-bw":
		g.remote = min(o.iters, 16, fit)
	default: // latency: one slot out, one back
		g.local, g.remote, g.depth = 2, 2, 1
	}
	return g
}

// pattern fills b with the bytes of slot k of queue pair q for seed.
func pattern(b []byte, seed uint64, q, k int) {
	r := rand.New(rand.NewPCG(seed, uint64(q)<<32|uint64(k)))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

// patterns is the expected content of a side's slots, generated once.
type patterns struct {
	stride int
	n      int      // slots per queue pair
	b      [][]byte // per queue pair, n slots of stride bytes
}

func newPatterns(seed uint64, qps, slots, stride int) *patterns {
	p := &patterns{stride: stride, n: slots}
	for q := range qps {
		b := make([]byte, slots*stride)
		for k := range slots {
			pattern(b[k*stride:(k+1)*stride], seed, q, k)
		}
		p.b = append(p.b, b)
	}
	return p
}

// slot is slot k of queue pair q's expected bytes.
func (p *patterns) slot(q, k int) []byte { return p.b[q][k*p.stride : (k+1)*p.stride] }

// stamp writes message i's index into its first bytes (all of them when
// the message is shorter than 8).
func stamp(b []byte, i uint64) {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], i)
	copy(b, h[:])
}

// stamped reads the index stamp, and whether the message is long enough
// to carry one whole.
func stamped(b []byte) (uint64, bool) {
	if len(b) < 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b), true
}

// checkMessage compares a landed message: got (size bytes) must be
// message i of the writer's slot i mod L, stamped i; for messages shorter
// than the stamp, the stamp's bytes of i.
func checkMessage(got []byte, want []byte, i uint64) bool {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], i)
	n := min(8, len(got))
	return bytes.Equal(got[:n], h[:n]) && bytes.Equal(got[n:], want[n:len(got)])
}

// verdict counts a side's checks.
type verdict struct {
	Verified   int `json:"messages_verified"`
	Superseded int `json:"messages_superseded,omitempty"`
	Corrupt    int `json:"messages_corrupt"`
	Missing    int `json:"messages_missing"`
}

func (v verdict) ok() bool { return v.Corrupt == 0 && v.Missing == 0 && v.Verified > 0 }

func (v *verdict) add(w verdict) {
	v.Verified += w.Verified
	v.Superseded += w.Superseded
	v.Corrupt += w.Corrupt
	v.Missing += w.Missing
}
