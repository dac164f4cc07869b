package testnet

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

// Config shapes the ready-made topologies.
type Config struct {
	// Link applies to every veth pair.
	Link LinkConfig
	// StaticNeighbors installs permanent ARP and ND entries for every
	// directly connected address, so no resolution traffic is needed (for
	// tests whose XDP program takes every packet off the wire).
	StaticNeighbors bool
}

// Host is a namespace with one interface and its addresses.
type Host struct {
	*Namespace
	// Port is the host's interface.
	Port *Endpoint
	// IPv4 and IPv6 are the host's addresses (prefixes /24 and /64).
	IPv4, IPv6 netip.Addr
}

// Pair is two hosts on one veth pair and one subnet.
type Pair struct {
	*Net
	A, B *Host
	Link *Link
}

// Star is N hosts, each linked to one switch that routes between them.
type Star struct {
	*Net
	Switch *Switch
	// Hosts[i] is linked to Switch.Ports[i].
	Hosts []*Host
}

// Addresses of the topologies. Each Net has its own namespaces, so these
// repeat harmlessly across Nets.
var (
	pairV4 = [2]netip.Prefix{netip.MustParsePrefix("10.99.0.1/24"), netip.MustParsePrefix("10.99.0.2/24")}
	pairV6 = [2]netip.Prefix{netip.MustParsePrefix("fd00:99::1/64"), netip.MustParsePrefix("fd00:99::2/64")}
)

// starV4 returns the addresses of subnet i: the switch port (.1) and the
// host (.2).
func starV4(i int) (sw, host netip.Prefix) {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i), 1}), 24),
		netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i), 2}), 24)
}

// starV6 is starV4 for IPv6: fd00:99:0:i::1 and ::2.
func starV6(i int) (sw, host netip.Prefix) {
	a := [16]byte{0xfd, 0x00, 0x00, 0x99, 0, 0, byte(i >> 8), byte(i)}
	b := a
	a[15], b[15] = 1, 2
	return netip.PrefixFrom(netip.AddrFrom16(a), 64), netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

// NewPair builds a Pair for a test, torn down by t.Cleanup.
func NewPair(t testing.TB, cfg Config) *Pair {
	t.Helper()
	n := New(t)
	p, err := buildPair(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// OpenPair builds a Pair outside tests; the caller must Close it.
func OpenPair(cfg Config) (*Pair, error) {
	n, err := Open()
	if err != nil {
		return nil, err
	}
	p, err := buildPair(n, cfg)
	if err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return p, nil
}

func buildPair(n *Net, cfg Config) (*Pair, error) {
	a, err := n.AddNamespace("a")
	if err != nil {
		return nil, err
	}
	b, err := n.AddNamespace("b")
	if err != nil {
		return nil, err
	}
	l, err := n.Connect(a, b, cfg.Link)
	if err != nil {
		return nil, err
	}
	p := &Pair{Net: n, Link: l,
		A: &Host{Namespace: a, Port: l.A, IPv4: pairV4[0].Addr(), IPv6: pairV6[0].Addr()},
		B: &Host{Namespace: b, Port: l.B, IPv4: pairV4[1].Addr(), IPv6: pairV6[1].Addr()},
	}
	for i, h := range []*Host{p.A, p.B} {
		if err := h.Port.AddAddr(pairV4[i]); err != nil {
			return nil, err
		}
		if err := h.Port.AddAddr(pairV6[i]); err != nil {
			return nil, err
		}
	}
	if cfg.StaticNeighbors {
		for i, h := range []*Host{p.A, p.B} {
			peer := h.Port.Peer
			if err := h.Port.AddNeighbor(pairV4[1-i].Addr(), peer.MAC); err != nil {
				return nil, err
			}
			if err := h.Port.AddNeighbor(pairV6[1-i].Addr(), peer.MAC); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// NewStar builds a Star of hosts (1 to 254) for a test, torn down by
// t.Cleanup.
func NewStar(t testing.TB, hosts int, cfg Config) *Star {
	t.Helper()
	n := New(t)
	s, err := buildStar(n, hosts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// OpenStar builds a Star outside tests; the caller must Close it.
func OpenStar(hosts int, cfg Config) (*Star, error) {
	n, err := Open()
	if err != nil {
		return nil, err
	}
	s, err := buildStar(n, hosts, cfg)
	if err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return s, nil
}

func buildStar(n *Net, hosts int, cfg Config) (*Star, error) {
	if hosts < 1 || hosts > 254 {
		return nil, fmt.Errorf("testnet: a star has 1 to 254 hosts, not %d", hosts)
	}
	swNS, err := n.AddNamespace("sw")
	if err != nil {
		return nil, err
	}
	sw, err := NewSwitch(swNS)
	if err != nil {
		return nil, err
	}
	s := &Star{Net: n, Switch: sw}
	for i := 0; i < hosts; i++ {
		ns, err := n.AddNamespace(fmt.Sprintf("h%d", i))
		if err != nil {
			return nil, err
		}
		l, err := n.Connect(ns, swNS, cfg.Link)
		if err != nil {
			return nil, err
		}
		if err := sw.AddPort(l.B); err != nil {
			return nil, err
		}
		sw4, h4 := starV4(i)
		sw6, h6 := starV6(i)
		h := &Host{Namespace: ns, Port: l.A, IPv4: h4.Addr(), IPv6: h6.Addr()}
		s.Hosts = append(s.Hosts, h)
		for _, st := range []struct {
			e *Endpoint
			p netip.Prefix
		}{{l.A, h4}, {l.A, h6}, {l.B, sw4}, {l.B, sw6}} {
			if err := st.e.AddAddr(st.p); err != nil {
				return nil, err
			}
		}
		if err := ns.AddRoute(netip.PrefixFrom(netip.IPv4Unspecified(), 0), sw4.Addr()); err != nil {
			return nil, err
		}
		if err := ns.AddRoute(netip.PrefixFrom(netip.IPv6Unspecified(), 0), sw6.Addr()); err != nil {
			return nil, err
		}
		if cfg.StaticNeighbors {
			for _, nb := range []struct {
				e  *Endpoint
				ip netip.Addr
			}{{l.A, sw4.Addr()}, {l.A, sw6.Addr()}, {l.B, h4.Addr()}, {l.B, h6.Addr()}} {
				if err := nb.e.AddNeighbor(nb.ip, nb.e.Peer.MAC); err != nil {
					return nil, err
				}
			}
		}
	}
	return s, nil
}
