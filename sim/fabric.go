package sim

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// A Clos fabric (docs/sim.md, "Fabric scenarios").
//
// Hosts are numbered 0..N-1 and sit, H to a leaf, in order: leaf l holds
// hosts l·H .. l·H+H-1, and in a three-tier fabric pod p holds leaves
// p·Lp .. p·Lp+Lp-1. That numbering makes every switch's forwarding a
// range test instead of a table: a switch reaches the hosts
// [base, base+reach) through its down ports, span hosts behind each, and
// everything else through its up ports, picked by an ECMP hash of
// (source, destination, UDP source port) under the switch's own seed (so
// the stages do not polarise: a flow hashed to uplink 3 at one leaf is
// not forced onto port 3 at the next stage). A spine or super-spine has
// no up ports: it reaches every host.
//
// With P planes the whole fabric is built P times; host h's NIC has one
// port per plane, and the transport's Datagram.Plane picks the port, as
// a multi-plane NIC does.
//
// Faults are blackholes: a link that goes down drops what it is offered,
// and switches keep hashing onto it. Routing convergence (BGP withdrawing
// the route) takes hundreds of milliseconds in a real fabric, longer than
// any collective simulated here, so the endpoints must route around the
// hole themselves, which is the property under test.

// Switch is one fabric switch.
type Switch struct {
	Name  string
	Plane int
	Tier  int // 0 leaf, 1 spine (two tiers) or aggregation (three), 2 super-spine
	idx   int32
	seed  uint32
	base  int32 // first host reached through the down ports
	reach int32 // hosts reached through the down ports
	span  int32 // hosts behind each down port
	Down  []*Link
	Up    []*Link
	// In lists the links that end at this switch (to cut them when it
	// fails).
	In []*Link
	// NoRoute counts packets for a destination it cannot reach.
	NoRoute uint64
}

// pick is the switch's forwarding decision.
func (s *Switch) pick(from, dst int32, port uint16) *Link {
	if dst < 0 {
		return nil
	}
	if d := dst - s.base; d >= 0 && d < s.reach {
		i := d / s.span
		if int(i) >= len(s.Down) {
			return nil
		}
		return s.Down[i]
	}
	if len(s.Up) == 0 {
		return nil
	}
	return s.Up[flowHash(from, dst, port, s.seed)%uint32(len(s.Up))]
}

// flowHash is a switch's ECMP hash of a packet's flow: the source and
// destination (hosts stand for their addresses) and the UDP source port,
// mixed with a murmur3 finaliser so nearby ports land on unrelated
// uplinks.
func flowHash(src, dst int32, port uint16, seed uint32) uint32 {
	h := seed ^ uint32(src)*0x9e3779b1
	h ^= uint32(dst) * 0x85ebca6b
	h ^= h >> 15
	h *= 0xc2b2ae35
	h ^= uint32(port) * 0x27d4eb2f
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// portRoute is a fabric host's NIC: one port (a link to its leaf) per
// plane, chosen by the plane the transport names. An endpoint that knows
// of one plane only (the rocev2 baseline: one path) is spread over the
// ports by a hash of its entropy instead, as a bonded NIC spreads flows.
type portRoute struct {
	ports []*Link
	hash  bool
}

func (p *portRoute) Pick(d transport.Datagram, from *Host) *Link {
	if p.hash {
		return p.ports[flowHash(int32(from.idx), 0, d.SrcPort, 0x2545f491)%uint32(len(p.ports))]
	}
	return p.ports[int(d.Plane)%len(p.ports)]
}

// ClosConfig describes a Clos fabric.
type ClosConfig struct {
	Tiers  int // 2 (leaf-spine) or 3 (leaf-aggregation-super-spine, in pods)
	Hosts  int
	Planes int
	// Radix is the ports per switch; 0 picks the smallest power of two
	// that fits Hosts.
	Radix int
	// Oversub is a leaf's host ports per uplink (1: non-blocking). The
	// tiers above the leaves are non-blocking.
	Oversub float64
	// HostBps is each NIC port's rate (one port per plane); FabricBps
	// each switch-to-switch link's.
	HostBps, FabricBps float64
	// HostDelay and FabricDelay are the propagation (plus switching)
	// delays of a host link and of a switch-to-switch link.
	HostDelay, FabricDelay time.Duration
	// QueueBytes and ECNBytes: every switch output port's buffer and
	// its DCTCP-style marking threshold.
	QueueBytes, ECNBytes int
	// Loss is random loss on every switch-to-switch link direction.
	Loss float64
	Seed uint64
}

// ClosDefaults: 100 Gb/s ports, 1 us per hop (cable plus a switch's
// cut-through latency), a 512 KiB buffer per port (a shallow-buffer
// switch's share) marking above 100 KB as in the congestion scenarios.
var ClosDefaults = ClosConfig{Tiers: 2, Planes: 1, Oversub: 1, HostBps: 100e9, FabricBps: 100e9,
	HostDelay: time.Microsecond, FabricDelay: time.Microsecond, QueueBytes: 512 << 10, ECNBytes: 100_000}

// Fabric is a built Clos fabric on a Network.
type Fabric struct {
	Cfg   ClosConfig
	Net   *Network
	Hosts []*Host
	// Leaves[p], Mids[p] (spines or aggregation) and Tops[p] (super
	// spines, three tiers only) are plane p's switches.
	Leaves, Mids, Tops [][]*Switch
	// HostLinks are the NIC-to-leaf and leaf-to-NIC links; FabricLinks
	// the switch-to-switch ones, where Loss applies.
	HostLinks, FabricLinks []*Link
	// H hosts per leaf, U uplinks per leaf, Lp leaves per pod (three
	// tiers), Pods.
	H, U, Lp, Pods int
}

// dims picks the radix (if unset) and derives the shape; it reports an
// error when the hosts do not fit.
func (c *ClosConfig) dims() (h, u, lp, pods int, err error) {
	shape := func(r int) (h, u, lp, pods int, ok bool) {
		h = int(float64(r)*c.Oversub/(1+c.Oversub) + 0.5)
		h = min(max(h, 1), r-1)
		u = r - h
		leaves := (c.Hosts + h - 1) / h
		if c.Tiers == 2 {
			return h, u, 0, 1, leaves <= r
		}
		lp = r / 2
		pods = (leaves + lp - 1) / lp
		return h, u, lp, pods, pods <= r
	}
	if c.Radix == 0 {
		for r := 4; r <= 1<<12; r *= 2 {
			if h, u, lp, pods, ok := shape(r); ok {
				c.Radix = r
				return h, u, lp, pods, nil
			}
		}
		return 0, 0, 0, 0, fmt.Errorf("sim: %d hosts do not fit a %d-tier Clos of radix up to 4096", c.Hosts, c.Tiers)
	}
	h, u, lp, pods, ok := shape(c.Radix)
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("sim: %d hosts do not fit a %d-tier Clos of radix %d (raise -radix or use clos3)", c.Hosts, c.Tiers, c.Radix)
	}
	return h, u, lp, pods, nil
}

// hostAddr is host i's address: 10.0.0.0/8, so up to 2^24 hosts.
func hostAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}

// NewFabric builds cfg on a new network; host i's endpoint gets tc with
// Seed derived from cfg.Seed and i.
func NewFabric(cfg ClosConfig, tc transport.Config) (*Fabric, error) {
	if cfg.Tiers != 2 && cfg.Tiers != 3 {
		return nil, fmt.Errorf("sim: %d tiers: want 2 or 3", cfg.Tiers)
	}
	if cfg.Hosts < 2 || cfg.Hosts > 1<<24 || cfg.Planes < 1 || cfg.Planes > 16 || cfg.Oversub <= 0 {
		return nil, fmt.Errorf("sim: clos: hosts 2..2^24, planes 1..16, oversubscription > 0")
	}
	h, u, lp, pods, err := cfg.dims()
	if err != nil {
		return nil, err
	}
	f := &Fabric{Cfg: cfg, Net: New(cfg.Seed), H: h, U: u, Lp: lp, Pods: pods}
	n := f.Net
	for i := range cfg.Hosts {
		tc.Seed = cfg.Seed*1_000_003 + uint64(i) + 1
		hs, err := n.AddHost(hostAddr(i), tc, cfg.HostBps*float64(cfg.Planes))
		if err != nil {
			return nil, err
		}
		hs.up = &portRoute{ports: make([]*Link, cfg.Planes), hash: hs.EP.Config().Planes < cfg.Planes}
		f.Hosts = append(f.Hosts, hs)
	}
	sw := func(name string, plane, tier int, base, reach, span int) *Switch {
		s := &Switch{Name: name, Plane: plane, Tier: tier, idx: int32(len(n.switches)),
			seed: uint32(cfg.Seed)*0x9e3779b1 ^ uint32(len(n.switches)+1)*0x7feb352d,
			base: int32(base), reach: int32(reach), span: int32(span)}
		n.switches = append(n.switches, s)
		return s
	}
	port := LinkConfig{RateBps: cfg.FabricBps, Delay: cfg.FabricDelay, QueueBytes: cfg.QueueBytes,
		ECNBytes: cfg.ECNBytes, Loss: cfg.Loss}
	// cable joins a (lower) and b (upper) with one link each way.
	cable := func(a, b *Switch) {
		upL := &Link{cfg: port, sw: b, name: a.Name + ">" + b.Name}
		downL := &Link{cfg: port, sw: a, name: b.Name + ">" + a.Name}
		a.Up = append(a.Up, upL)
		b.In = append(b.In, upL)
		b.Down = append(b.Down, downL)
		a.In = append(a.In, downL)
		f.FabricLinks = append(f.FabricLinks, upL, downL)
	}
	leaves := (cfg.Hosts + h - 1) / h
	f.Leaves = make([][]*Switch, cfg.Planes)
	f.Mids = make([][]*Switch, cfg.Planes)
	f.Tops = make([][]*Switch, cfg.Planes)
	for p := range cfg.Planes {
		for l := range leaves {
			s := sw(fmt.Sprintf("p%d-leaf%d", p, l), p, 0, l*h, h, 1)
			f.Leaves[p] = append(f.Leaves[p], s)
			for i := l * h; i < min(cfg.Hosts, (l+1)*h); i++ {
				hs := f.Hosts[i]
				// The NIC port: at the port rate, its queue unbounded
				// (a NIC back-pressures its own queues, it does not
				// drop), and the only serialisation besides the NIC's
				// when there is one plane.
				hn := fmt.Sprintf("h%d", i)
				toLeaf := &Link{cfg: LinkConfig{RateBps: cfg.HostBps, Delay: cfg.HostDelay}, sw: s,
					name: hn + ">" + s.Name, chain: true}
				toHost := &Link{cfg: LinkConfig{RateBps: cfg.HostBps, Delay: cfg.HostDelay,
					QueueBytes: cfg.QueueBytes, ECNBytes: cfg.ECNBytes}, to: hs, name: s.Name + ">" + hn}
				hs.up.(*portRoute).ports[p] = toLeaf
				s.In = append(s.In, toLeaf)
				s.Down = append(s.Down, toHost)
				f.HostLinks = append(f.HostLinks, toLeaf, toHost)
			}
		}
		if cfg.Tiers == 2 {
			for j := range u {
				s := sw(fmt.Sprintf("p%d-spine%d", p, j), p, 1, 0, cfg.Hosts, h)
				f.Mids[p] = append(f.Mids[p], s)
				for _, lf := range f.Leaves[p] {
					cable(lf, s)
				}
			}
			continue
		}
		// Three tiers: pod q has leaves q·Lp.. and U aggregation
		// switches; aggregation switch j of every pod connects to the
		// r/2 super-spines of group j.
		per := h * lp
		for q := range pods {
			for j := range u {
				s := sw(fmt.Sprintf("p%d-pod%d-agg%d", p, q, j), p, 1, q*per, per, h)
				f.Mids[p] = append(f.Mids[p], s)
				for l := q * lp; l < min(leaves, (q+1)*lp); l++ {
					cable(f.Leaves[p][l], s)
				}
			}
		}
		for j := range u {
			for k := range cfg.Radix / 2 {
				s := sw(fmt.Sprintf("p%d-super%d-%d", p, j, k), p, 2, 0, cfg.Hosts, per)
				f.Tops[p] = append(f.Tops[p], s)
				for q := range pods {
					cable(f.Mids[p][q*u+j], s)
				}
			}
		}
	}
	return f, nil
}

// BaseRTT is the unloaded round trip of a full data packet of wireBytes
// (with WireOverhead) across the widest path (up to the top tier and
// down), its ack of ackBytes coming back the same way.
func (c *ClosConfig) BaseRTT(wireBytes, ackBytes int) Time {
	hops := 2 * (c.Tiers - 1) // switch-to-switch links one way
	ser := func(b int, bps float64) Time { return Time(float64(b*8) / bps * 1e9) }
	one := func(b int) Time {
		// NIC, NIC port, fabric hops, leaf to host.
		return ser(b, c.HostBps*float64(c.Planes)) + 2*ser(b, c.HostBps) + Time(hops)*ser(b, c.FabricBps) +
			2*Time(c.HostDelay) + Time(hops)*Time(c.FabricDelay)
	}
	return one(wireBytes) + one(ackBytes)
}

// latency is the unloaded one-way latency from host a to host b of a
// packet of wireBytes: store-and-forward at the NIC, its port, every
// switch-to-switch link and the leaf's port to b, plus the delays. Hosts
// under one leaf are two host links apart; under one pod (three tiers),
// two fabric links more; else 2 (tiers - 1).
func (f *Fabric) latency(a, b int32, wireBytes int) Time {
	c := &f.Cfg
	hops := 0
	switch {
	case int(a)/f.H == int(b)/f.H:
	case c.Tiers == 3 && int(a)/(f.H*f.Lp) == int(b)/(f.H*f.Lp):
		hops = 2
	default:
		hops = 2 * (c.Tiers - 1)
	}
	ser := func(bps float64) Time { return Time(float64(wireBytes*8) / bps * 1e9) }
	return ser(c.HostBps*float64(c.Planes)) + 2*ser(c.HostBps) + Time(hops)*ser(c.FabricBps) +
		2*Time(c.HostDelay) + Time(hops)*Time(c.FabricDelay)
}

// LinkDown cuts a cable: l and, if found, its reverse direction.
func (f *Fabric) LinkDown(l *Link) {
	l.down = true
	if r := f.reverse(l); r != nil {
		r.down = true
	}
}

// reverse finds the other direction of a switch-to-switch cable.
func (f *Fabric) reverse(l *Link) *Link {
	for i := 0; i+1 < len(f.FabricLinks); i += 2 {
		if f.FabricLinks[i] == l {
			return f.FabricLinks[i+1]
		}
		if f.FabricLinks[i+1] == l {
			return f.FabricLinks[i]
		}
	}
	return nil
}

// SwitchDown fails a switch: every link into or out of it drops.
func (f *Fabric) SwitchDown(s *Switch) {
	for _, ls := range [][]*Link{s.In, s.Up, s.Down} {
		for _, l := range ls {
			l.down = true
		}
	}
}

// PlaneDown fails every switch of plane p (and so every NIC port on it).
func (f *Fabric) PlaneDown(p int) {
	for _, tier := range [][][]*Switch{f.Leaves, f.Mids, f.Tops} {
		for _, s := range tier[p] {
			f.SwitchDown(s)
		}
	}
}

// Degrade divides a cable's rate by factor (both directions) and gives
// it random loss: a flapping optic or a port that renegotiated down.
func (f *Fabric) Degrade(l *Link, factor, loss float64) {
	for _, x := range []*Link{l, f.reverse(l)} {
		if x == nil {
			continue
		}
		if factor > 1 {
			x.cfg.RateBps /= factor
		}
		x.cfg.Loss = max(x.cfg.Loss, loss)
	}
}
