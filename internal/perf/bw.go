package perf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metaroce/metaroce/client"
)

// bandwidth keeps up to g.depth requests outstanding on each queue pair
// until o.iters have completed on each, and reports the rate and its 1 ms
// windows. write-bw sends message i from local slot i mod L, stamped, as
// a WRITE with immediate i into remote slot i mod R (the server checks
// it, landed); read-bw READs remote slot i mod R into local slot i mod L,
// zeroed first, and checks it on completion.
func bandwidth(ctx context.Context, o perfOpts, s *setup, peer perfInfo, size int) (Row, verdict, error) {
	g := s.g
	read := o.test == "read-bw"
	op := client.OpWriteImm
	if read {
		op = client.OpRead
	}
	var v verdict
	posted := make([]int, len(s.qps))
	done := make([]int, len(s.qps))
	busy := make([][]bool, len(s.qps)) // local slot in use by an outstanding request
	for q := range busy {
		busy[q] = make([]bool, g.local)
	}
	cq := make([]client.Completion, 64)
	wrs := make([]client.WR, 0, 64)
	start := time.Now()
	total, want := 0, o.iters*len(s.qps)
	var win []int64 // bytes completed in each 1 ms window since start
	complete := func(q int, cs []client.Completion) error {
		for _, c := range cs {
			if err := c.Err(); err != nil {
				return fmt.Errorf("perf: %s %d: %w", c.Op, c.WRID, err)
			}
			i := int(c.WRID)
			k := i % g.local
			if !busy[q][k] {
				return fmt.Errorf("perf: queue pair %d: completion for request %d, which is not outstanding", q, i)
			}
			busy[q][k] = false
			if read {
				// The server's slots carry no stamp: every byte is its
				// pattern, and the slot was zeroed before the READ.
				if readLanded(s.slot(q, k, size), s.expect.slot(q, i%g.remote)) {
					v.Verified++
				} else {
					v.Corrupt++
				}
			}
		}
		done[q] += len(cs)
		total += len(cs)
		idx := int(time.Since(start) / time.Millisecond)
		for len(win) <= idx {
			win = append(win, 0)
		}
		win[idx] += int64(len(cs) * size)
		return nil
	}
	for total < want {
		progress := false
		for q, qp := range s.qps {
			wrs = wrs[:0]
			for posted[q]-done[q] < g.depth && posted[q] < o.iters && len(wrs) < cap(wrs) {
				i := posted[q]
				k := i % g.local
				if busy[q][k] {
					break // the slot's last request has not completed yet
				}
				local := s.slot(q, k, size)
				if read {
					clear(local)
				} else {
					stamp(local, uint64(i))
				}
				busy[q][k] = true
				wrs = append(wrs, client.WR{Op: op, WRID: uint64(i), Local: s.mr, LocalOff: s.slotOff(q, k),
					Length: size, RemoteAddr: peer.RAddr + uint64(q*g.remote*g.stride+(i%g.remote)*g.stride),
					RemoteKey: peer.Key, Imm: uint32(i)})
				posted[q]++
			}
			if len(wrs) > 0 {
				n, err := qp.Post(wrs...)
				if err != nil && !errors.Is(err, client.ErrSQFull) {
					return Row{}, v, err
				}
				for _, w := range wrs[n:] { // not taken: free their slots again
					busy[q][int(w.WRID)%g.local] = false
				}
				posted[q] -= len(wrs) - n
			}
			n, err := qp.PollCQ(cq)
			if err != nil {
				return Row{}, v, err
			}
			if err := complete(q, cq[:n]); err != nil {
				return Row{}, v, err
			}
			progress = progress || n > 0
		}
		if !progress {
			// Every window is full: block (after a short spin) on the
			// queue pair with the most outstanding, rather than spin and
			// take the CPU the daemon's engine needs.
			k := 0
			for q := range s.qps {
				if posted[q]-done[q] > posted[k]-done[k] {
					k = q
				}
			}
			if posted[k] > done[k] {
				n, err := s.qps[k].WaitCQ(ctx, cq)
				if err != nil {
					return Row{}, v, err
				}
				if err := complete(k, cq[:n]); err != nil {
					return Row{}, v, err
				}
			}
		}
		if ctx.Err() != nil {
			return Row{}, v, ctx.Err()
		}
	}
	el := time.Since(start).Seconds()
	avg := float64(total*size*8) / el / 1e9
	row := Row{Bytes: size, Iterations: o.iters, BWAvgGbps: avg, MsgRateMpps: float64(total) / el / 1e6}
	row.windowStats(win)
	row.BWPeakGbps = max(row.BWPeakGbps, avg)
	return row, v, nil
}

// readLanded reports whether a READ placed the remote slot's bytes: got
// was zeroed before the READ, and a slot's pattern is never zero.
func readLanded(got, want []byte) bool { return bytes.Equal(got, want[:len(got)]) }

// windowStats summarises the full 1 ms windows (the last, partial one is
// left out): peak, median, 10th percentile and the windows with nothing
// completed.
func (r *Row) windowStats(win []int64) {
	if len(win) > 1 {
		win = win[:len(win)-1]
	}
	gbps := make([]float64, len(win))
	for i, b := range win {
		gbps[i] = float64(b*8) / 1e-3 / 1e9
		if b == 0 {
			r.StalledWindows++
		}
	}
	slices.Sort(gbps)
	r.Windows = len(gbps)
	if len(gbps) == 0 {
		return
	}
	at := func(p float64) float64 { return round3(gbps[min(len(gbps)-1, int(p*float64(len(gbps))))]) }
	r.WindowP50Gbps, r.WindowP10Gbps, r.BWPeakGbps = at(0.5), at(0.1), gbps[len(gbps)-1]
}

// landed is the write-bw server's check: it reads every queue pair's
// completions (one per WRITE with immediate) and checks each message in
// its slot as it lands, until every message of every size has landed or
// ctx ends (then the rest are missing). Sizes run one after another (the
// client starts a size when the last one's WRITEs have all completed),
// but one batch of completions may hold the end of one size and the start
// of the next, so the phase moves on per completion.
func landed(ctx context.Context, o perfOpts, s *setup, peer perfInfo) (verdict, error) {
	g := s.g
	wp := newPatterns(peer.Seed, o.qps, g.local, g.stride) // what the client's slots hold
	var v verdict
	cq := make([]client.Completion, 64)
	sizes := o.sizes()
	phase, got, want := 0, 0, o.iters*o.qps
	seen := make([][]bool, o.qps)
	reset := func() {
		for q := range seen {
			seen[q] = make([]bool, o.iters)
		}
	}
	reset()
	check := func(q int, cs []client.Completion) error {
		for _, c := range cs {
			if err := c.Err(); err != nil {
				return fmt.Errorf("perf: queue pair %d: %s: %w", q, c.Op, err)
			}
			if phase == len(sizes) {
				v.Corrupt++ // more messages than the run has
				continue
			}
			size, i := sizes[phase], int(c.Imm)
			if c.Op != client.CompRecvWriteImm || c.Bytes != size || i >= o.iters || seen[q][i] {
				v.Corrupt++ // not a message of this size, or landed twice
				continue
			}
			seen[q][i] = true
			if got++; got == want {
				phase, got = phase+1, 0
				reset()
			}
			slot := s.slot(q, i%g.remote, size)
			j := uint64(i)
			if h, ok := stamped(slot); ok && h != j && h > j && h < uint64(o.iters) && (h-j)%uint64(g.remote) == 0 {
				// A later message already overwrote the slot: it must
				// be intact, and this one is superseded.
				if checkMessage(slot, wp.slot(q, int(h)%g.local), h) {
					v.Superseded++
				} else {
					v.Corrupt++
				}
				continue
			}
			if checkMessage(slot, wp.slot(q, i%g.local), j) {
				v.Verified++
			} else {
				v.Corrupt++
			}
		}
		return nil
	}
	turn := 0
	for phase < len(sizes) {
		progress := false
		for q, qp := range s.qps {
			n, err := qp.PollCQ(cq)
			if err != nil {
				return v, err
			}
			if err := check(q, cq[:n]); err != nil {
				return v, err
			}
			progress = progress || n > 0
		}
		if progress {
			continue
		}
		if ctx.Err() != nil {
			v.Missing += want - got + (len(sizes)-phase-1)*want
			return v, nil
		}
		// Nothing: wait on one queue pair in turn, briefly, so none is
		// starved and an idle server sleeps.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Millisecond)
		n, err := s.qps[turn].WaitCQ(wctx, cq)
		cancel()
		if err == nil {
			if err := check(turn, cq[:n]); err != nil {
				return v, err
			}
		}
		turn = (turn + 1) % len(s.qps)
	}
	return v, nil
}
