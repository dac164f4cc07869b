package transport

import (
	"errors"
	"net/netip"

	"github.com/metaroce/metaroce/wire"
)

// Planes with addresses (docs/spec.md §7.9). A host wired to P planes has
// one address per plane; the endpoint's own address is plane 0's. The
// endpoint announces planes 1..P-1 in its CONNECT or ACCEPT, learns the
// peer's from the peer's, and each connection keeps the planes both ends
// have (U, ascending, plane 0 first). Path i is on plane U[i mod |U|]: the
// sender sends its packets between the two ends' addresses on that plane,
// and the receiver acks path i on the same plane, computed from the same
// U. An endpoint without plane addresses (the simulator's hosts: one
// address, a port per plane) keeps the older rule, path i on plane
// i mod Config.Planes, every plane reaching the peer's one address.

// MaxPlanes is the most planes a host may have (§7.9): plane 0 and the
// wire.MaxPlaneAddrs others a CONNECT or ACCEPT can name.
const MaxPlanes = wire.MaxPlaneAddrs + 1

// connPlanes is a connection's view of the planes, set at the handshake
// and read per packet.
type connPlanes struct {
	// n is |U|; 0: the endpoint has no plane addresses (the older rule).
	n uint8
	// list is U: the planes both ends have, ascending, list[0] = 0.
	list [MaxPlanes]uint8
	// peer[p] is the peer's address on plane p (peer[0] = Conn.peer);
	// valid for the planes in list.
	peer [MaxPlanes]netip.Addr
}

// SetPlaneAddrs tells the endpoint its address on each plane: addrs[0]
// must be its own address (NewEndpoint's local), addrs[p] the address of
// its port on plane p, or the zero Addr when it has none there. It must be
// called before the first connection, with len(addrs) = Config.Planes, at
// most MaxPlanes. With one address nothing changes: the endpoint sends
// what a single-plane endpoint sends.
func (e *Endpoint) SetPlaneAddrs(addrs []netip.Addr) error {
	switch {
	case len(e.conns) > 0:
		return errors.New("metaroce: plane addresses must be set before any connection")
	case len(addrs) != e.cfg.Planes:
		return errors.New("metaroce: need one plane address per configured plane")
	case len(addrs) > MaxPlanes:
		return errors.New("metaroce: at most 8 planes")
	case len(addrs) == 0 || addrs[0] != e.local:
		return errors.New("metaroce: plane 0's address must be the endpoint's")
	}
	for _, a := range addrs[1:] {
		if a.IsValid() && !planeUsable(e.local, a) {
			return errors.New("metaroce: plane address " + a.String() + " is not a unicast address of the endpoint's family")
		}
	}
	if len(addrs) == 1 {
		e.planeAddrs = nil
		return nil
	}
	e.planeAddrs = append([]netip.Addr(nil), addrs...)
	return nil
}

// PlaneAddrs returns the endpoint's plane addresses (nil: none set).
func (e *Endpoint) PlaneAddrs() []netip.Addr { return e.planeAddrs }

// planeUsable reports whether a is an address a plane may have beside the
// connection's plane-0 address base (§7.9): same family, unicast, not
// loopback or link-local.
func planeUsable(base, a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && a.Is4() == base.Unmap().Is4() && !a.IsUnspecified() && !a.IsLoopback() &&
		!a.IsMulticast() && !a.IsLinkLocalUnicast()
}

// putPlanes writes the endpoint's plane addresses into a CONNECT or
// ACCEPT: planes 1..P-1, 16 zero bytes for a plane it has no address on.
func (e *Endpoint) putPlanes(h *wire.ConnHeader) {
	if len(e.planeAddrs) < 2 {
		return
	}
	h.PlaneAddrs = uint16(len(e.planeAddrs) - 1)
	for i, a := range e.planeAddrs[1:] {
		if a.IsValid() {
			h.Planes[i] = a.As16()
		}
	}
}

// learnPlanes computes the connection's planes from the peer's CONNECT or
// ACCEPT p (§7.9): plane 0, and each plane both ends have a usable
// address on. Called before establish, which lays the paths over them.
func (c *Conn) learnPlanes(p wire.Conn) {
	e := c.ep
	c.planes = connPlanes{}
	if len(e.planeAddrs) < 2 {
		return
	}
	pl := &c.planes
	pl.n, pl.list[0], pl.peer[0] = 1, 0, c.peer
	for i := range min(p.PlaneAddrs(), len(e.planeAddrs)-1) {
		a := netip.AddrFrom16([16]byte(p.PlaneAddr(i)))
		if c.peer.Is4() {
			a = a.Unmap()
		}
		if !e.planeAddrs[i+1].IsValid() || !planeUsable(c.peer, a) || (c.peer.Is4() && !a.Is4()) {
			continue
		}
		pl.list[pl.n], pl.peer[i+1] = uint8(i+1), a
		pl.n++
	}
}

// pathPlane is the plane of PathID id: the sender's path, or the path of
// the peer's that an ack or nack speaks for (the same U at both ends).
func (c *Conn) pathPlane(id int) uint8 {
	if c.planes.n == 0 {
		return uint8(id % c.ep.cfg.Planes)
	}
	return c.planes.list[id%int(c.planes.n)]
}

// planeDst is where a packet on plane pl goes: the peer's address there.
func (c *Conn) planeDst(pl uint8) netip.Addr {
	if c.planes.n == 0 || pl == 0 {
		return c.peer
	}
	return c.planes.peer[pl]
}

// fromPeer reports whether a data, ack or nack packet from from belongs
// to c: the peer's plane-0 address, or its address on one of the
// connection's planes (§7.9).
func (c *Conn) fromPeer(from netip.Addr) bool {
	_, ok := c.peerPlane(from)
	return ok
}

// peerPlane is the plane of the connection on which the peer has address
// from, if any.
func (c *Conn) peerPlane(from netip.Addr) (uint8, bool) {
	if from == c.peer {
		return 0, true
	}
	if c.planes.n < 2 {
		return 0, false
	}
	for _, p := range c.planes.list[1:c.planes.n] {
		if c.planes.peer[p] == from {
			return p, true
		}
	}
	return 0, false
}

// Proof of a peer's plane addresses (§7.9). A peer names its addresses
// on its other planes in the handshake, and nothing in the handshake
// shows that it receives there: a misconfigured host, or one that means
// harm, could name a third host's address and have this end spray its
// share of the connection's traffic at it. So a plane p != 0 starts
// unproven: its paths start suspect (paths.go), carry no data and are
// probed at once, with the probe schedule, retirements and back-off of
// §8.7.4; an answer to such a probe restores its path only if it came
// from the peer's address on plane p (an ack from elsewhere proves
// nothing about that address), and the first path restored on the plane
// proves it (planeHealth). Until then the plane is down, and the
// connection runs on plane 0, which the handshake proved, and on the
// planes proven already; a plane never proven costs its probes, backed
// off to one per path per MaxProbeInterval, and nothing else.

// startUnproven makes every plane of the connection but 0 unproven, at
// its establishment. A connection of one plane, or of an endpoint without
// plane addresses, has none.
func (c *Conn) startUnproven(now Time) {
	if c.planes.n < 2 || !c.healthOn() {
		return
	}
	s := &c.snd
	iv := c.probeInterval()
	for i := range s.paths {
		p := &s.paths[i]
		if p.plane == 0 || int(p.plane) >= MaxPlanes {
			continue
		}
		p.state = pathSuspect
		p.probeInterval, p.probeAt = iv, now
	}
	for _, pl := range c.planes.list[1:c.planes.n] {
		s.planeUnproven[pl], s.planeDown[pl], s.planeDownAt[pl] = true, true, now
		c.ep.stats.PlanesUnproven++
	}
	s.rebuildActive()
	s.pathTimer = now
}

// proven reports whether plane pl may carry data (plane 0 always may).
func (s *sender) proven(pl uint8) bool { return int(pl) >= MaxPlanes || !s.planeUnproven[pl] }

// planeProven notes that the peer answered on plane pl (§7.9): the plane
// may carry data, and the peer's address there may carry its
// connection-management packets too (byPlane, §7.7).
func (c *Conn) planeProven(pl uint8) {
	c.snd.planeUnproven[pl] = false
	c.ep.stats.PlanesProven++
	c.ep.byPlane[peerKey{c.planes.peer[pl], c.peerID}] = c
}

// forgetPlanes removes the connection's proven plane addresses from the
// endpoint's index (release).
func (c *Conn) forgetPlanes() {
	if c.planes.n < 2 {
		return
	}
	for _, pl := range c.planes.list[1:c.planes.n] {
		if k := (peerKey{c.planes.peer[pl], c.peerID}); c.ep.byPlane[k] == c {
			delete(c.ep.byPlane, k)
		}
	}
}

// Planes returns the planes the connection sprays over (U of §7.9; [0]
// for a connection without plane addresses, or the Config.Planes planes
// of an endpoint without plane addresses), the peer's address on each and
// the plane's health (§8.7.4), appended to dst. Call on the owner.
func (c *Conn) Planes(dst []PlaneInfo) []PlaneInfo {
	start := len(dst)
	switch {
	case c.planes.n > 0:
		for _, p := range c.planes.list[:c.planes.n] {
			dst = append(dst, PlaneInfo{Plane: int(p), Peer: c.planeDst(p)})
		}
	default:
		for p := range min(c.ep.cfg.Planes, MaxPlanes) {
			dst = append(dst, PlaneInfo{Plane: p, Peer: c.peer})
		}
	}
	s := &c.snd
	for i := range dst[start:] {
		pi := &dst[start+i]
		for k := range s.paths {
			if int(s.paths[k].plane) == pi.Plane {
				pi.Paths++
				if s.paths[k].state == pathActive {
					pi.ActivePaths++
				}
			}
		}
		if pi.Plane < MaxPlanes && s.planeDown[pi.Plane] {
			pi.Down, pi.DownSince = true, s.planeDownAt[pi.Plane]
			pi.Unproven = s.planeUnproven[pi.Plane]
		}
	}
	return dst
}

// PlanesDown is how many of the connection's planes are down (§8.7.4),
// unproven ones (§7.9) included.
// It does not allocate: telemetry calls it for every connection.
func (c *Conn) PlanesDown() int {
	n := 0
	for _, d := range c.snd.planeDown {
		if d {
			n++
		}
	}
	return n
}

// PlaneInfo is one plane of a connection.
type PlaneInfo struct {
	Plane int
	Peer  netip.Addr // the peer's address on the plane
	// Paths is how many of the connection's paths are on the plane,
	// ActivePaths how many of them carry data; Down: none does (every
	// one is suspect, §8.7.4), since DownSince (the endpoint's clock).
	Paths, ActivePaths int
	Down               bool
	DownSince          Time
	// Unproven: the peer has not yet answered a probe from its address
	// on the plane (§7.9); the plane is down until it does.
	Unproven bool
}

// Connection management off plane 0 (§7.7, §7.9). An established
// connection's teardown must not depend on plane 0 alone: a host whose
// plane-0 port is down keeps moving data on its other planes, and its
// application's close must finish too. So a DISCONNECT goes on plane 0
// while plane 0 is up, else on the first proven plane that is up, and
// each resend moves on to the next proven plane; the DISCONNECT_ACK
// goes back to the address (and on the plane) the DISCONNECT came from;
// and DISCONNECT, DISCONNECT_ACK and RESET are taken from the peer's
// plane-0 address or its address on a proven plane of the connection.
// Only proven planes: an address that has answered this connection's
// probes is the peer's own, so taking its packets from there lets no one
// in whom the peer did not name and who does not answer for it.

// teardownPlane is the plane of the k-th DISCONNECT (k from 0): the up
// proven planes first, plane 0 leading, then the down ones, in turn.
func (c *Conn) teardownPlane(k int) uint8 {
	pl := &c.planes
	if pl.n < 2 {
		return 0
	}
	s := &c.snd
	var order [MaxPlanes]uint8
	m := 0
	for _, down := range [2]bool{false, true} {
		for _, p := range pl.list[:pl.n] {
			if s.proven(p) && s.planeDown[p] == down {
				order[m] = p
				m++
			}
		}
	}
	return order[k%m] // m >= 1: plane 0 is always proven
}

// fromTeardownPeer reports whether a DISCONNECT_ACK from from may speak
// for c: the peer's plane-0 address, or its address on a proven plane.
func (c *Conn) fromTeardownPeer(from netip.Addr) bool {
	p, ok := c.peerPlane(from)
	return ok && c.snd.proven(p)
}

// connOfPeer finds the connection whose peer has id peerID and sends
// from from: its plane-0 address (byPeer) or its address on a proven
// plane (byPlane).
func (e *Endpoint) connOfPeer(from netip.Addr, peerID uint32) *Conn {
	k := peerKey{from, peerID}
	if c := e.byPeer[k]; c != nil {
		return c
	}
	return e.byPlane[k]
}
