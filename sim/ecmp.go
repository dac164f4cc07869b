package sim

import (
	"github.com/metaroce/metaroce/transport"
)

// ECMP is a route over parallel paths, chosen per packet by hashing the
// flow's 5-tuple the way a switch does: the same entropy (UDP source port)
// always takes the same path, and the sender cannot tell which. Paths can
// be grouped into planes (Plane[i] is path i's plane); a packet only takes
// paths of the plane its Datagram names, as a NIC port is wired to one
// plane.
type ECMP struct {
	Paths  []*Link
	Plane  []int // nil: one plane
	Seed   uint32
	Counts []uint64 // packets carried per path
	byPln  [][]int
}

// NewECMP returns an ECMP route over paths.
func NewECMP(paths []*Link, planes []int, seed uint32) *ECMP {
	e := &ECMP{Paths: paths, Plane: planes, Seed: seed, Counts: make([]uint64, len(paths))}
	np := 1
	for _, p := range planes {
		np = max(np, p+1)
	}
	e.byPln = make([][]int, np)
	for i := range paths {
		pl := 0
		if planes != nil {
			pl = planes[i]
		}
		e.byPln[pl] = append(e.byPln[pl], i)
	}
	return e
}

// Pick implements Route.
func (e *ECMP) Pick(d transport.Datagram, from *Host) *Link {
	pl := int(d.Plane) % len(e.byPln)
	cand := e.byPln[pl]
	i := cand[hash5(from.idx, d, e.Seed)%uint32(len(cand))]
	e.Counts[i]++
	return e.Paths[i]
}

// PathOf returns the path index a datagram would take (for tests).
func (e *ECMP) PathOf(d transport.Datagram, from *Host) int {
	pl := int(d.Plane) % len(e.byPln)
	cand := e.byPln[pl]
	return cand[hash5(from.idx, d, e.Seed)%uint32(len(cand))]
}

// hash5 mixes source, destination and source port (the destination port
// is the same for every MetaRoCE packet) with a murmur3-style finalizer,
// so nearby ports spread over paths.
func hash5(src int, d transport.Datagram, seed uint32) uint32 {
	a := d.Dst.As16()
	h := seed ^ uint32(src)*0x9e3779b1
	for i := 0; i < 16; i += 4 {
		h ^= uint32(a[i])<<24 | uint32(a[i+1])<<16 | uint32(a[i+2])<<8 | uint32(a[i+3])
		h *= 0x85ebca6b
		h ^= h >> 13
	}
	h ^= uint32(d.SrcPort) * 0xc2b2ae35
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
