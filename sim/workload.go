package sim

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// Workloads of the fabric scenarios, as lists of WRITEs with
// dependencies. Each message is one RDMA WRITE with immediate from src to
// dst; the immediate names the message, so the receiver learns of its
// arrival from its own completion queue (as a collective library does)
// and posts the message that waited for it. A message with waits > 0 is
// posted when that many arrivals at its source have happened; after
// names the message whose arrival at this message's source unblocks it
// (each collective step here waits on exactly one arrival).

// fmsg is one message of a workload.
type fmsg struct {
	src, dst int32
	size     int32
	next     int32 // the message this one's arrival unblocks (-1: none)
	blocked  bool  // waits for an arrival before it is posted
	bg       bool  // background traffic, not part of the collective
	posted   Time
	done     Time // the sender's completion (acked)
	arrived  Time // the receiver's completion (placed)
	ok       bool
	settled  bool // counted done (acked and arrived)
}

// Workload names (metaroce sim -scenario).
const (
	WorkPermutation = "permutation"
	WorkAllToAll    = "alltoall"
	WorkRing        = "allreduce-ring"
	WorkHD          = "allreduce-hd"
	WorkIncast      = "incast"
)

// buildWorkload returns the collective's messages. size is bytes per
// message (permutation, incast), per peer (alltoall) or the whole buffer
// being reduced (all-reduce).
func buildWorkload(kind string, hosts, size, fanin int, seed uint64) ([]fmsg, error) {
	var ms []fmsg
	add := func(src, dst, n int) int32 {
		ms = append(ms, fmsg{src: int32(src), dst: int32(dst), size: int32(max(n, 1)), next: -1})
		return int32(len(ms) - 1)
	}
	switch kind {
	case WorkPermutation:
		// A random derangement: every host sends to one other and
		// receives from one other.
		rng := rand.New(rand.NewPCG(seed, 11))
		p := rng.Perm(hosts)
		for i := range p {
			if p[i] == i {
				j := (i + 1) % hosts
				p[i], p[j] = p[j], p[i]
			}
		}
		for i, d := range p {
			add(i, d, size)
		}
	case WorkAllToAll:
		// MoE dispatch: every host writes size bytes to every other.
		// Host i's k-th peer is i XOR k when the host count is a power
		// of two (pairwise exchange: each step is a perfect matching,
		// both ends writing to each other, so no receiver is the target
		// of two writers), else i+k; either way the first packets do
		// not all converge on one host.
		pow2 := hosts&(hosts-1) == 0
		for k := 1; k < hosts; k++ {
			for i := range hosts {
				if pow2 {
					add(i, i^k, size)
				} else {
					add(i, (i+k)%hosts, size)
				}
			}
		}
	case WorkRing:
		// Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps
		// of size/N bytes from each host to the next; a host sends step
		// k+1 once step k from its predecessor has arrived.
		chunk := (size + hosts - 1) / hosts
		for k := range 2 * (hosts - 1) {
			for i := range hosts {
				m := add(i, (i+1)%hosts, chunk)
				if k > 0 {
					prev := int32((k-1)*hosts + (i-1+hosts)%hosts)
					ms[prev].next = m
					ms[m].blocked = true
				}
			}
		}
	case WorkHD:
		// Halving-doubling all-reduce: log2 N reduce-scatter steps
		// exchanging size/2, size/4, ... with the partner at distance
		// 1, 2, 4, ... (the largest exchanges stay under one leaf), then
		// the all-gather retraces them. Step s waits for the partner's
		// step s-1 data.
		if hosts&(hosts-1) != 0 {
			return nil, fmt.Errorf("sim: %s needs a power-of-two host count, not %d", kind, hosts)
		}
		lg := bits.Len(uint(hosts)) - 1
		var dist, sizes []int
		for s := range lg {
			dist = append(dist, 1<<s)
			sizes = append(sizes, size>>(s+1))
		}
		for s := lg - 1; s >= 0; s-- {
			dist = append(dist, 1<<s)
			sizes = append(sizes, size>>(s+1))
		}
		for st := range dist {
			for i := range hosts {
				m := add(i, i^dist[st], sizes[st])
				if st > 0 {
					prev := int32((st-1)*hosts + (i ^ dist[st-1]))
					ms[prev].next = m
					ms[m].blocked = true
				}
			}
		}
	case WorkIncast:
		if fanin <= 0 || fanin >= hosts {
			fanin = hosts - 1
		}
		for i := 1; i <= fanin; i++ {
			add(i, 0, size)
		}
	default:
		return nil, fmt.Errorf("sim: unknown fabric workload %q (permutation, alltoall, allreduce-ring, allreduce-hd, incast)", kind)
	}
	return ms, nil
}

// idealNs is the collective's lower bound in ns on an empty fabric: the
// larger of (a) its critical path, each message taking its bytes at the
// payload rate nicBps plus the one-way latency of its first packet
// (lat) after the arrival it waits for, (b) the busiest NIC's bytes at
// the payload rate, and (c) the bytes that cross the bisection (hosts
// below N/2 against the rest) over the bisection's payload bandwidth in
// both directions; (b) and (c) plus the smallest latency of a message.
func idealNs(ms []fmsg, hosts int, nicBps, bisectionBps float64, lat func(m *fmsg) Time) float64 {
	start := make([]float64, len(ms))
	var crit float64
	sent := make([]float64, hosts)
	recv := make([]float64, hosts)
	var cross float64
	minLat := Time(1 << 62)
	for i := range ms {
		m := &ms[i]
		if m.bg {
			continue
		}
		b := float64(m.size) * 8
		l := lat(m)
		minLat = min(minLat, l)
		end := start[i] + b/nicBps*1e9 + float64(l)
		crit = max(crit, end)
		if m.next >= 0 {
			start[m.next] = max(start[m.next], end)
		}
		sent[m.src] += b
		recv[m.dst] += b
		if (int(m.src) < hosts/2) != (int(m.dst) < hosts/2) {
			cross += b
		}
	}
	var busiest float64
	for i := range sent {
		busiest = max(busiest, sent[i], recv[i])
	}
	nic := busiest/nicBps*1e9 + float64(minLat)
	bis := cross/(2*bisectionBps)*1e9 + float64(minLat)
	return max(crit, nic, bis)
}
