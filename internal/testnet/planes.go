package testnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

// Planes is a host fabric of independent planes (docs/spec.md §7.9): every
// host has one interface per plane, each plane is its own switch namespace
// that routes between the hosts' ports on it, and the planes share
// nothing, so a plane can be cut (its switch blackholed) while the others
// carry on.
type Planes struct {
	*Net
	// Switches[p] is plane p's switch; its Ports[i] faces host i.
	Switches []*Switch
	Hosts    []*PlaneHost
}

// PlaneHost is a namespace with one interface and one IPv4 address per
// plane.
type PlaneHost struct {
	*Namespace
	// Ports[p] is the host's interface on plane p, IPv4[p] its address
	// (plane p, host i: 10.(110+p).i.2/24, the switch port .1).
	Ports []*Endpoint
	IPv4  []netip.Addr
}

// planeV4 returns plane p's subnet of host i: the switch port (.1) and
// the host (.2).
func planeV4(p, i int) (sw, host netip.Prefix) {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(110 + p), byte(i), 1}), 24),
		netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(110 + p), byte(i), 2}), 24)
}

// planeRoute is what a host routes through its port on plane p: the
// plane's /16.
func planeRoute(p int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(110 + p), 0, 0}), 16)
}

// NewPlanes builds hosts (2..254) on planes (1..8) for a test, torn down
// by t.Cleanup.
func NewPlanes(t testing.TB, hosts, planes int, cfg Config) *Planes {
	t.Helper()
	n := New(t)
	f, err := buildPlanes(n, hosts, planes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// OpenPlanes builds Planes outside tests; the caller must Close it.
func OpenPlanes(hosts, planes int, cfg Config) (*Planes, error) {
	n, err := Open()
	if err != nil {
		return nil, err
	}
	f, err := buildPlanes(n, hosts, planes, cfg)
	if err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return f, nil
}

func buildPlanes(n *Net, hosts, planes int, cfg Config) (*Planes, error) {
	if hosts < 2 || hosts > 254 || planes < 1 || planes > 8 {
		return nil, fmt.Errorf("testnet: planes need 2..254 hosts and 1..8 planes, not %d and %d", hosts, planes)
	}
	f := &Planes{Net: n}
	for i := range hosts {
		ns, err := n.AddNamespace(fmt.Sprintf("h%d", i))
		if err != nil {
			return nil, err
		}
		f.Hosts = append(f.Hosts, &PlaneHost{Namespace: ns})
	}
	for p := range planes {
		swNS, err := n.AddNamespace(fmt.Sprintf("pl%d", p))
		if err != nil {
			return nil, err
		}
		sw, err := NewSwitch(swNS)
		if err != nil {
			return nil, err
		}
		f.Switches = append(f.Switches, sw)
		for i, h := range f.Hosts {
			l, err := n.Connect(h.Namespace, swNS, cfg.Link)
			if err != nil {
				return nil, err
			}
			if err := sw.AddPort(l.B); err != nil {
				return nil, err
			}
			sw4, h4 := planeV4(p, i)
			h.Ports = append(h.Ports, l.A)
			h.IPv4 = append(h.IPv4, h4.Addr())
			if err := l.A.AddAddr(h4); err != nil {
				return nil, err
			}
			if err := l.B.AddAddr(sw4); err != nil {
				return nil, err
			}
			if err := h.AddRoute(planeRoute(p), sw4.Addr()); err != nil {
				return nil, err
			}
			if cfg.StaticNeighbors {
				if err := l.A.AddNeighbor(sw4.Addr(), l.B.MAC); err != nil {
					return nil, err
				}
				if err := l.B.AddNeighbor(h4.Addr(), l.A.MAC); err != nil {
					return nil, err
				}
			}
		}
	}
	return f, nil
}

// IfaceCount is an interface's packet counters, as the kernel keeps them.
type IfaceCount struct {
	RxPackets, TxPackets, RxBytes, TxBytes uint64
}

// Counters reads the kernel's counters of interface e (ip -s -j link).
// They count every frame the interface sent or received, whoever sent it:
// AF_XDP copy-mode frames included.
func (e *Endpoint) Counters() (IfaceCount, error) {
	var c IfaceCount
	out, err := e.NS.Run("ip", "-s", "-j", "link", "show", "dev", e.Name)
	if err != nil {
		return c, err
	}
	var doc []struct {
		Stats struct {
			Rx struct{ Packets, Bytes uint64 } `json:"rx"`
			Tx struct{ Packets, Bytes uint64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc) != 1 {
		return c, fmt.Errorf("testnet: parse ip -s -j link of %s: %v", e, err)
	}
	s := doc[0].Stats
	return IfaceCount{RxPackets: s.Rx.Packets, TxPackets: s.Tx.Packets, RxBytes: s.Rx.Bytes, TxBytes: s.Tx.Bytes}, nil
}
