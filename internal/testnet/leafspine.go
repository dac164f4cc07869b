package testnet

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
)

// A two-tier Clos fabric of namespaces: hosts hang off two leaves, and every
// leaf links to every spine. The leaves route to the other leaf's hosts over
// an equal-cost multipath route with one next hop per spine, hashed on the
// L4 ports (fib_multipath_hash_policy=1), so a flow's UDP source port picks
// its spine exactly as a datacenter fabric's ECMP does. Rate limits on the
// leaf-spine links (both directions) make the spines the bottleneck, as
// oversubscribed uplinks are in a real fabric.
//
// Addresses, l the leaf (0 or 1), j the host, s the spine:
//
//	host l.j          10.(100+l).j.2/24   fd00:98:l:j::2/64   default via .1 / ::1 (the leaf)
//	leaf l to spine s 10.(110+l).s.1/24   fd00:97:l:s::1/64
//	spine s to leaf l 10.(110+l).s.2/24   fd00:97:l:s::2/64
//
// Leaf l routes 10.(100+o).0.0/16 and fd00:98:o::/48 (the other leaf o's
// hosts) via every spine; spine s routes each leaf's aggregate via that
// leaf's link.

// Fabric sizes: the addressing above keeps each in one byte.
const (
	maxSpines       = 16
	maxHostsPerLeaf = 254
)

// spineTable and spineChain count what each spine forwards. They live in
// their own table at a later priority than the Switch's drop chain, so a
// packet the spine blackholes is not counted: the counters say what the
// spine carried, not what was offered to it.
const (
	spineTable = "mrtnls"
	spineChain = "carried"
)

// LeafSpineConfig shapes a leaf-spine fabric. The zero value is 2 hosts per
// leaf, 4 spines, no rate limits.
type LeafSpineConfig struct {
	// HostsPerLeaf is the number of hosts on each of the two leaves; 0
	// means 2.
	HostsPerLeaf int
	// Spines is the number of spines; 0 means 4.
	Spines int
	// SpineRate, if not 0, limits every leaf-spine link in both directions
	// (tc tbf on the leaf's uplink end and on the spine's end) to this many
	// bits per second, so that the spines are the bottleneck.
	SpineRate uint64
	// Link applies to every veth pair (host-leaf and leaf-spine).
	Link LinkConfig
	// StaticNeighbors installs permanent ARP and ND entries on every link.
	StaticNeighbors bool
}

func (c LeafSpineConfig) withDefaults() (LeafSpineConfig, error) {
	if c.HostsPerLeaf == 0 {
		c.HostsPerLeaf = 2
	}
	if c.Spines == 0 {
		c.Spines = 4
	}
	if c.HostsPerLeaf < 1 || c.HostsPerLeaf > maxHostsPerLeaf {
		return c, fmt.Errorf("testnet: a leaf has 1 to %d hosts, not %d", maxHostsPerLeaf, c.HostsPerLeaf)
	}
	if c.Spines < 1 || c.Spines > maxSpines {
		return c, fmt.Errorf("testnet: a fabric has 1 to %d spines, not %d", maxSpines, c.Spines)
	}
	return c, nil
}

// LeafSpine is two leaves, their hosts, and the spines between them.
type LeafSpine struct {
	*Net
	Config LeafSpineConfig
	// Leaves[l] is leaf l; its hosts are Leaves[l].Hosts.
	Leaves [2]*Leaf
	// Spines[s] is spine s.
	Spines []*Spine

	// hashes are the leaves' hash-clearing tc links (leafspine_hash.go).
	hashes io.Closer
}

// Leaf is a top-of-rack switch: host ports first, then one uplink per spine.
type Leaf struct {
	*Switch
	// Index is 0 or 1.
	Index int
	// Hosts[j] is linked to the leaf's port j.
	Hosts []*Host
	// Uplinks[s] is the leaf's end of the link to spine s.
	Uplinks []*Endpoint
}

// Spine is a spine switch. Its Switch.Ports[l] is its end of the link to
// leaf l.
type Spine struct {
	*Switch
	// Index is the spine's number, as in Spines[Index].
	Index int
	// Addr4[l] and Addr6[l] are the spine's addresses on its link to leaf
	// l: the next hops leaf l's multipath route names.
	Addr4, Addr6 [2]netip.Addr
}

// NewLeafSpine builds a fabric for a test, torn down by t.Cleanup even when
// the test fails.
func NewLeafSpine(t testing.TB, cfg LeafSpineConfig) *LeafSpine {
	t.Helper()
	n := New(t)
	f, err := buildLeafSpine(n, cfg)
	if f != nil && f.hashes != nil {
		// Registered after New's cleanup, so it runs first: programs
		// detach, then the namespaces go.
		t.Cleanup(func() { f.hashes.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// OpenLeafSpine builds a fabric outside tests; the caller must Close it.
func OpenLeafSpine(cfg LeafSpineConfig) (*LeafSpine, error) {
	n, err := Open()
	if err != nil {
		return nil, err
	}
	f, err := buildLeafSpine(n, cfg)
	if err != nil {
		if f != nil {
			return nil, errors.Join(err, f.Close())
		}
		return nil, errors.Join(err, n.Close())
	}
	return f, nil
}

func leafHostAddrs(l, j int) (leaf4, host4, leaf6, host6 netip.Prefix) {
	leaf4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + l), byte(j), 1}), 24)
	host4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + l), byte(j), 2}), 24)
	a := [16]byte{0xfd, 0x00, 0x00, 0x98, 0, byte(l), byte(j >> 8), byte(j)}
	b := a
	a[15], b[15] = 1, 2
	return leaf4, host4, netip.PrefixFrom(netip.AddrFrom16(a), 64), netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

func uplinkAddrs(l, s int) (leaf4, spine4, leaf6, spine6 netip.Prefix) {
	leaf4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(110 + l), byte(s), 1}), 24)
	spine4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(110 + l), byte(s), 2}), 24)
	a := [16]byte{0xfd, 0x00, 0x00, 0x97, 0, byte(l), 0, byte(s)}
	b := a
	a[15], b[15] = 1, 2
	return leaf4, spine4, netip.PrefixFrom(netip.AddrFrom16(a), 64), netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

// leafAggregates are the prefixes covering every host of leaf l.
func leafAggregates(l int) (v4, v6 netip.Prefix) {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + l), 0, 0}), 16),
		netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x00, 0x00, 0x98, 0, byte(l)}), 48)
}

// addrPlan is one address to add on an end and, with static neighbours, the
// peer's address to pin.
type addrPlan struct {
	e         *Endpoint
	own, peer netip.Prefix
	static    bool
}

func (p addrPlan) apply() error {
	if err := p.e.AddAddr(p.own); err != nil {
		return err
	}
	if p.static {
		return p.e.AddNeighbor(p.peer.Addr(), p.e.Peer.MAC)
	}
	return nil
}

func buildLeafSpine(n *Net, cfg LeafSpineConfig) (*LeafSpine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	f := &LeafSpine{Net: n, Config: cfg}
	for l := range f.Leaves {
		ns, err := n.AddNamespace(fmt.Sprintf("leaf%d", l))
		if err != nil {
			return nil, err
		}
		sw, err := NewSwitch(ns)
		if err != nil {
			return nil, err
		}
		f.Leaves[l] = &Leaf{Switch: sw, Index: l}
	}
	for s := 0; s < cfg.Spines; s++ {
		ns, err := n.AddNamespace(fmt.Sprintf("spine%d", s))
		if err != nil {
			return nil, err
		}
		sw, err := NewSwitch(ns)
		if err != nil {
			return nil, err
		}
		f.Spines = append(f.Spines, &Spine{Switch: sw, Index: s})
	}

	// Hosts and their leaf ports.
	for l, leaf := range f.Leaves {
		for j := 0; j < cfg.HostsPerLeaf; j++ {
			ns, err := n.AddNamespace(fmt.Sprintf("l%dh%d", l, j))
			if err != nil {
				return nil, err
			}
			lk, err := n.Connect(ns, leaf.Namespace, cfg.Link)
			if err != nil {
				return nil, err
			}
			if err := leaf.AddPort(lk.B); err != nil {
				return nil, err
			}
			leaf4, host4, leaf6, host6 := leafHostAddrs(l, j)
			h := &Host{Namespace: ns, Port: lk.A, IPv4: host4.Addr(), IPv6: host6.Addr()}
			leaf.Hosts = append(leaf.Hosts, h)
			for _, p := range []addrPlan{
				{e: lk.A, own: host4, peer: leaf4}, {e: lk.A, own: host6, peer: leaf6},
				{e: lk.B, own: leaf4, peer: host4}, {e: lk.B, own: leaf6, peer: host6},
			} {
				p.static = cfg.StaticNeighbors
				if err := p.apply(); err != nil {
					return nil, err
				}
			}
			if err := ns.AddRoute(netip.PrefixFrom(netip.IPv4Unspecified(), 0), leaf4.Addr()); err != nil {
				return nil, err
			}
			if err := ns.AddRoute(netip.PrefixFrom(netip.IPv6Unspecified(), 0), leaf6.Addr()); err != nil {
				return nil, err
			}
		}
	}

	// Leaf-spine links, rate-limited at both ends.
	for _, sp := range f.Spines {
		for l, leaf := range f.Leaves {
			lk, err := n.Connect(leaf.Namespace, sp.Namespace, cfg.Link)
			if err != nil {
				return nil, err
			}
			leaf.Uplinks = append(leaf.Uplinks, lk.A)
			if err := sp.AddPort(lk.B); err != nil {
				return nil, err
			}
			leaf4, spine4, leaf6, spine6 := uplinkAddrs(l, sp.Index)
			sp.Addr4[l], sp.Addr6[l] = spine4.Addr(), spine6.Addr()
			for _, p := range []addrPlan{
				{e: lk.A, own: leaf4, peer: spine4}, {e: lk.A, own: leaf6, peer: spine6},
				{e: lk.B, own: spine4, peer: leaf4}, {e: lk.B, own: spine6, peer: leaf6},
			} {
				p.static = cfg.StaticNeighbors
				if err := p.apply(); err != nil {
					return nil, err
				}
			}
			if cfg.SpineRate > 0 {
				if err := lk.A.SetRate(cfg.SpineRate, 0); err != nil {
					return nil, err
				}
				if err := lk.B.SetRate(cfg.SpineRate, 0); err != nil {
					return nil, err
				}
			}
			// The spine reaches leaf l's hosts through this link only.
			agg4, agg6 := leafAggregates(l)
			if err := sp.AddRoute(agg4, leaf4.Addr()); err != nil {
				return nil, err
			}
			if err := sp.AddRoute(agg6, leaf6.Addr()); err != nil {
				return nil, err
			}
		}
		if err := sp.installCounters(); err != nil {
			return nil, err
		}
	}

	// Each leaf reaches the other leaf's hosts through every spine.
	for l, leaf := range f.Leaves {
		o := 1 - l
		agg4, agg6 := leafAggregates(o)
		var via4, via6 []netip.Addr
		for _, sp := range f.Spines {
			via4 = append(via4, sp.Addr4[l])
			via6 = append(via6, sp.Addr6[l])
		}
		if err := leaf.AddRoute(agg4, via4...); err != nil {
			return nil, err
		}
		if err := leaf.AddRoute(agg6, via6...); err != nil {
			return nil, err
		}
	}
	if f.hashes, err = f.clearHashes(); err != nil {
		return f, err
	}
	return f, nil
}

// Hosts returns every host, leaf 0's first.
func (f *LeafSpine) Hosts() []*Host {
	var hs []*Host
	for _, l := range f.Leaves {
		hs = append(hs, l.Hosts...)
	}
	return hs
}

// LeafOf returns the leaf h hangs off, or nil if h is not in the fabric.
func (f *LeafSpine) LeafOf(h *Host) *Leaf {
	for _, l := range f.Leaves {
		for _, x := range l.Hosts {
			if x == h {
				return l
			}
		}
	}
	return nil
}

// CutMode says how CutSpine fails a spine.
type CutMode int

const (
	// Blackhole drops everything the spine would forward (an nft drop rule
	// in its forward hook) while its links stay up, so the leaves keep
	// hashing flows onto it: a gray failure, or a real fabric in the
	// seconds before routing notices. Only the endpoints can route around
	// it.
	Blackhole CutMode = iota
	// LinkDown takes the spine's links down; the leaves mark the next hop
	// dead and rehash every flow over the other spines at once, as a
	// switch that sees loss of light does.
	LinkDown
)

func (m CutMode) String() string {
	switch m {
	case Blackhole:
		return "blackhole"
	case LinkDown:
		return "linkdown"
	}
	return fmt.Sprintf("CutMode(%d)", int(m))
}

// ParseCutMode parses "blackhole" or "linkdown".
func ParseCutMode(s string) (CutMode, error) {
	switch s {
	case "blackhole":
		return Blackhole, nil
	case "linkdown":
		return LinkDown, nil
	}
	return 0, fmt.Errorf("testnet: cut mode %q: want blackhole or linkdown", s)
}

// CutSpine fails spine s.
func (f *LeafSpine) CutSpine(s int, mode CutMode) error {
	sp, err := f.spine(s)
	if err != nil {
		return err
	}
	switch mode {
	case Blackhole:
		return sp.SetLoss(1)
	case LinkDown:
		var errs []error
		for _, p := range sp.Ports {
			errs = append(errs, p.Link.Cut())
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("testnet: unknown cut mode %v", mode)
}

// RestoreSpine undoes CutSpine: the drop rule goes and the links come back
// up with their routes (the leaves' multipath routes included).
func (f *LeafSpine) RestoreSpine(s int) error {
	sp, err := f.spine(s)
	if err != nil {
		return err
	}
	errs := []error{sp.SetLoss(0)}
	// Every link up before any route goes back: the spine's routes name
	// next hops on all of its links, and a route via a link still down is
	// refused.
	for _, p := range sp.Ports {
		errs = append(errs, p.SetUp(), p.Peer.SetUp())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// A link going down deleted the routes through it, the leaves'
	// multipath routes among them; re-apply them all.
	errs = append(errs, sp.reapply())
	for _, l := range f.Leaves {
		errs = append(errs, l.reapply())
	}
	return errors.Join(errs...)
}

func (f *LeafSpine) spine(s int) (*Spine, error) {
	if s < 0 || s >= len(f.Spines) {
		return nil, fmt.Errorf("testnet: fabric has no spine %d", s)
	}
	return f.Spines[s], nil
}

// SpineOf returns the spine the source host's leaf hashes a flow onto: the
// kernel's own answer (ip route get with the flow's ports, entering through
// the host's port), so it is what the forwarding path does, not a model of
// it. proto is "udp" or "tcp".
func (f *LeafSpine) SpineOf(from *Host, dst netip.Addr, proto string, sport, dport uint16) (int, error) {
	leaf := f.LeafOf(from)
	if leaf == nil {
		return -1, fmt.Errorf("testnet: %s is not a host of this fabric", from.Name)
	}
	src := from.IPv4
	if dst.Is6() {
		src = from.IPv6
	}
	out, err := leaf.Run("ip", "route", "get", dst.String(), "from", src.String(), "iif", from.Port.Peer.Name,
		"ipproto", proto, "sport", fmt.Sprint(sport), "dport", fmt.Sprint(dport))
	if err != nil {
		return -1, err
	}
	f4 := strings.Fields(out)
	for i := 0; i+1 < len(f4); i++ {
		if f4[i] != "via" {
			continue
		}
		via, err := netip.ParseAddr(f4[i+1])
		if err != nil {
			break
		}
		for _, sp := range f.Spines {
			if sp.Addr4[leaf.Index] == via || sp.Addr6[leaf.Index] == via {
				return sp.Index, nil
			}
		}
	}
	return -1, fmt.Errorf("testnet: no spine in %q", strings.TrimSpace(out))
}
