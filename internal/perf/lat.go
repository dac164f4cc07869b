package perf

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/metaroce/metaroce/client"
)

// The latency tests' layout: each side sends from its slot 0 and receives
// into its slot 1 (the client) or its slot 0 (the server, which echoes
// what landed from its slot 1). Message i is the client's slot-0 pattern
// stamped i; the server checks it where it lands and echoes it, and the
// client checks the echo, so both directions of every round trip are
// verified. The checks sit outside the timed section on the client; on
// the server they add a compare of the message to its answer's time
// (nanoseconds for the default 64 bytes).

// ping runs the client half of a latency test: a message out, the
// server's answer back, o.iters times; half the round trip is the latency
// (perftest's convention).
func ping(ctx context.Context, o perfOpts, s *setup, peer perfInfo, size int) (Row, verdict, error) {
	var v verdict
	q := s.qps[0]
	lat := make([]float64, 0, o.iters)
	// acked: from each post to its own completion (the peer's ack of the
	// message, delivered by our engine), a hop breakdown of the round
	// trip: the round trip less it is about the server's two hops
	// between its engine and its application.
	acked := make([]float64, 0, o.iters)
	posted := make([]time.Time, o.iters)
	var cq [4]client.Completion
	out, in := s.slot(0, 0, size), s.slot(0, 1, size)
	want := newPatterns(o.seed, 1, 1, size).slot(0, 0)
	for i := range o.iters {
		if o.test == "send-lat" {
			if err := q.PostRecv(uint64(i), s.mr, s.slotOff(0, 1), size); err != nil {
				return Row{}, v, err
			}
		}
		stamp(out, uint64(i))
		t0 := time.Now()
		posted[i] = t0
		var err error
		if o.test == "write-lat" {
			err = q.PostWriteImm(uint64(i), s.mr, 0, size, peer.RAddr, peer.Key, uint32(i))
		} else {
			err = q.PostSend(uint64(i), s.mr, 0, size)
		}
		if err != nil {
			return Row{}, v, err
		}
		got := false
		for !got {
			n, err := q.WaitCQ(ctx, cq[:])
			if err != nil {
				return Row{}, v, err
			}
			for _, c := range cq[:n] {
				if err := c.Err(); err != nil {
					return Row{}, v, fmt.Errorf("perf: %s %d: %w", c.Op, c.WRID, err)
				}
				if (c.Op == client.CompWrite || c.Op == client.CompSend) && c.WRID <= uint64(i) {
					// Possibly an earlier message's, acked after its echo.
					acked = append(acked, float64(time.Since(posted[c.WRID]))/1e3)
				}
				if c.Op == client.CompRecvWriteImm || c.Op == client.CompRecv {
					if c.Bytes != size || (c.Op == client.CompRecvWriteImm && c.Imm != uint32(i)) {
						return Row{}, v, fmt.Errorf("perf: answer %d: %d bytes imm %d", i, c.Bytes, c.Imm)
					}
					got = true
				}
			}
		}
		lat = append(lat, float64(time.Since(t0))/2e3)
		if checkMessage(in, want, uint64(i)) {
			v.Verified++
		} else {
			v.Corrupt++
		}
	}
	r := latRow(size, lat)
	if len(acked) > 0 {
		slices.Sort(acked)
		r.AckRTTP50us = round3(acked[len(acked)/2])
		r.AckRTTP99us = round3(acked[min(len(acked)-1, len(acked)*99/100)])
	}
	return r, v, nil
}

// pong is the server half: check each message where it landed and echo
// it back.
func pong(ctx context.Context, o perfOpts, s *setup, peer perfInfo) (verdict, error) {
	var v verdict
	q := s.qps[0]
	var cq [4]client.Completion
	seq := 0
	for _, size := range o.sizes() {
		in, out := s.slot(0, 0, size), s.slot(0, 1, size)
		want := newPatterns(peer.Seed, 1, 1, size).slot(0, 0)
		for i := range o.iters {
			if o.test == "send-lat" {
				if err := q.PostRecv(uint64(seq), s.mr, 0, size); err != nil {
					return v, err
				}
			}
			got := false
			for !got {
				n, err := q.WaitCQ(ctx, cq[:])
				if err != nil {
					return v, err
				}
				for _, c := range cq[:n] {
					if err := c.Err(); err != nil {
						return v, fmt.Errorf("perf: %s %d: %w", c.Op, c.WRID, err)
					}
					got = got || c.Op == client.CompRecvWriteImm || c.Op == client.CompRecv
				}
			}
			if checkMessage(in, want, uint64(i)) {
				v.Verified++
			} else {
				v.Corrupt++
			}
			copy(out, in)
			var err error
			if o.test == "write-lat" {
				err = q.PostWriteImm(uint64(seq), s.mr, s.slotOff(0, 1), size, peer.RAddr+uint64(s.g.stride), peer.Key, uint32(i))
			} else {
				err = q.PostSend(uint64(seq), s.mr, s.slotOff(0, 1), size)
			}
			if err != nil {
				return v, err
			}
			seq++
		}
	}
	return v, nil
}
