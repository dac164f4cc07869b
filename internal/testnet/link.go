package testnet

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// ErrNoEthtool is returned by SetOffloads when ethtool is not installed
// (apt-get install ethtool).
var ErrNoEthtool = errors.New("testnet: ethtool not found: install the Debian package ethtool (make deps) to change veth offloads")

// LinkConfig shapes a veth pair. The zero value is a 1500-byte MTU, one
// queue, kernel-default offloads.
type LinkConfig struct {
	// MTU of both ends; 0 means 1500. Native XDP without the frags flag
	// cannot attach above about 3506 (see docs/platform.md).
	MTU int
	// Queues is numtxqueues and numrxqueues of both ends; 0 means 1. In
	// native XDP a frame sent on queue q arrives on the peer's queue q.
	Queues int
	// NoOffloads turns TSO, GSO and GRO off on both ends (needs ethtool),
	// so that a drop in a forwarding namespace drops one wire packet and not
	// a 64 KB super-packet.
	NoOffloads bool
}

func (c LinkConfig) withDefaults() LinkConfig {
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.Queues == 0 {
		c.Queues = 1
	}
	return c
}

// Link is a veth pair: A in one namespace, B in another.
type Link struct {
	A, B   *Endpoint
	Config LinkConfig
}

// Endpoint is one end of a veth pair.
type Endpoint struct {
	// NS is the namespace the interface lives in.
	NS *Namespace
	// Name is the interface name inside NS (unique, at most 15 bytes).
	Name string
	// MAC is the interface's hardware address (locally administered, set at
	// creation).
	MAC net.HardwareAddr
	// Peer is the other end of the pair.
	Peer *Endpoint
	// Link is the pair this end belongs to.
	Link *Link
}

func (e *Endpoint) String() string { return e.NS.Label + ":" + e.Name }

// Connect creates a veth pair with one end in a and the other in b, both up.
// Both ends are created directly in their namespaces: nothing appears in the
// caller's namespace, not even briefly.
func (n *Net) Connect(a, b *Namespace, cfg LinkConfig) (*Link, error) {
	if a == b {
		return nil, errors.New("testnet: Connect needs two namespaces")
	}
	cfg = cfg.withDefaults()
	var r [1]byte
	_, _ = rand.Read(r[:])
	c := counter.Add(1)
	pid := os.Getpid()
	l := &Link{Config: cfg}
	l.A = &Endpoint{NS: a, Name: ifaceName(pid, c, r[0], 'a'), MAC: newMAC(), Link: l}
	l.B = &Endpoint{NS: b, Name: ifaceName(pid, c, r[0], 'b'), MAC: newMAC(), Link: l}
	l.A.Peer, l.B.Peer = l.B, l.A

	q := strconv.Itoa(cfg.Queues)
	mtu := strconv.Itoa(cfg.MTU)
	if _, err := run("ip", "link", "add",
		"name", l.A.Name, "numtxqueues", q, "numrxqueues", q, "address", l.A.MAC.String(),
		"mtu", mtu, "netns", a.Name,
		"type", "veth", "peer",
		"name", l.B.Name, "numtxqueues", q, "numrxqueues", q, "address", l.B.MAC.String(),
		"mtu", mtu, "netns", b.Name); err != nil {
		return nil, err
	}
	for _, e := range []*Endpoint{l.A, l.B} {
		if cfg.NoOffloads {
			if err := e.SetOffloads(false); err != nil {
				return nil, err
			}
		}
		if err := e.SetUp(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// newMAC returns a random unicast, locally administered address.
func newMAC() net.HardwareAddr {
	m := make(net.HardwareAddr, 6)
	_, _ = rand.Read(m)
	m[0] = m[0]&^0x01 | 0x02
	return m
}

// Cut takes both ends down: no frame crosses until Restore. A link going down
// deletes the routes and neighbour entries through it; Restore re-applies
// those made with AddRoute and AddNeighbor.
func (l *Link) Cut() error {
	return errors.Join(l.A.SetDown(), l.B.SetDown())
}

// Restore brings both ends up again and re-applies the routes and static
// neighbour entries of both namespaces.
func (l *Link) Restore() error {
	if err := errors.Join(l.A.SetUp(), l.B.SetUp()); err != nil {
		return err
	}
	return errors.Join(l.A.NS.reapply(), l.B.NS.reapply())
}

// SetUp sets the interface up.
func (e *Endpoint) SetUp() error { return e.NS.IP("link set dev " + e.Name + " up") }

// SetDown sets the interface down.
func (e *Endpoint) SetDown() error { return e.NS.IP("link set dev " + e.Name + " down") }

// SetMTU changes the interface's MTU.
func (e *Endpoint) SetMTU(mtu int) error {
	return e.NS.IP(fmt.Sprintf("link set dev %s mtu %d", e.Name, mtu))
}

// Ifindex returns the interface index inside its namespace.
func (e *Endpoint) Ifindex() (int, error) { return e.NS.Ifindex(e.Name) }

// AddAddr adds an address with its prefix length ("10.99.0.1/24"). IPv6
// addresses are added with nodad, so they are usable at once.
func (e *Endpoint) AddAddr(p netip.Prefix) error {
	cmd := fmt.Sprintf("addr add %s dev %s", p, e.Name)
	if p.Addr().Is6() {
		cmd += " nodad"
	}
	return e.NS.IP(cmd)
}

// AddNeighbor adds a permanent neighbour (ARP or ND) entry for ip on this
// interface, so that no resolution traffic is needed. It is re-applied by
// Link.Restore.
func (e *Endpoint) AddNeighbor(ip netip.Addr, mac net.HardwareAddr) error {
	return e.NS.addSticky(fmt.Sprintf("neigh replace %s lladdr %s dev %s nud permanent", ip, mac, e.Name))
}

// SetRate limits what this interface sends to bitsPerSec with a tc tbf root
// qdisc. burst is the bucket in bytes; 0 picks 10 ms worth at the rate, at
// least two MTUs. The queue is bounded at 50 ms (tbf latency); beyond it
// packets are dropped.
func (e *Endpoint) SetRate(bitsPerSec uint64, burst int) error {
	if bitsPerSec == 0 {
		return errors.New("testnet: SetRate needs a rate; use ClearRate to remove")
	}
	if burst == 0 {
		burst = int(bitsPerSec / 8 / 100)
		if min := 2 * e.Link.Config.MTU; burst < min {
			burst = min
		}
	}
	_, err := run("tc", "-n", e.NS.Name, "qdisc", "replace", "dev", e.Name, "root", "tbf",
		"rate", strconv.FormatUint(bitsPerSec, 10)+"bit",
		"burst", strconv.Itoa(burst), "latency", "50ms")
	return err
}

// ClearRate removes the rate limit (the root qdisc) if there is one.
func (e *Endpoint) ClearRate() error {
	_, err := run("tc", "-n", e.NS.Name, "qdisc", "del", "dev", e.Name, "root")
	if err != nil {
		// "Cannot delete qdisc with handle of zero" when none is set.
		out, _ := run("tc", "-n", e.NS.Name, "qdisc", "show", "dev", e.Name, "root")
		if !strings.Contains(out, "tbf") {
			return nil
		}
	}
	return err
}

// SetOffloads turns TSO, GSO and GRO on or off (ethtool -K).
func (e *Endpoint) SetOffloads(on bool) error {
	if _, err := exec.LookPath("ethtool"); err != nil {
		return ErrNoEthtool
	}
	v := "off"
	if on {
		v = "on"
	}
	_, err := e.NS.Run("ethtool", "-K", e.Name, "tso", v, "gso", v, "gro", v)
	return err
}

// SetThreadedNAPI switches the interface's NAPI to kernel threads, which on
// veth spreads receive work over the cores. The kernel allows it only while
// an XDP program is attached to the interface.
func (e *Endpoint) SetThreadedNAPI(on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	_, err := e.NS.Run("sh", "-c", "echo "+v+" > /sys/class/net/"+e.Name+"/threaded")
	return err
}
