package sim

import (
	"math/bits"

	"github.com/metaroce/metaroce/transport"
)

// The windowed all-to-all (FabricConfig.Window): host i's q-th write is
// ms[q·N+i], to its (q+1)-th peer; at most Window of them are in flight,
// the next started as one completes.
//
// Lazy (FabricConfig.Lazy) connects per peer instead of keeping a full
// mesh. With a power-of-two host count the peers pair up (i and i XOR k
// write to each other at step k), so one connection serves both writes:
// one end connects (initiates, below) and posts its write once it is up,
// the other posts its own when that write has arrived (lazyArrived), and
// the initiator closes the connection when both writes are acked. Otherwise
// each write gets a connection of its own, closed when the write is
// acked. With pairs the window counts the pairs a host initiates (about
// half of them): the writes it accepts are posted as their connections
// come up, in the initiators' windows. Holding a slot for an accepted
// write instead would let slow initiators fill a fast host's window with
// writes it cannot start, a convoy that made a 128-host run 12x slower.

// openNext starts host's next all-to-all write: posted at once on the
// full mesh, or (lazy) once a connection for it is up.
func (r *fabricRun) openNext(now Time, host int) {
	hosts := len(r.f.Hosts)
	var mi int32
	for {
		q := r.cursor[host]
		if q >= hosts-1 {
			return
		}
		r.cursor[host]++
		mi = int32(q*hosts + host)
		if !r.lazy {
			r.post(now, mi)
			return
		}
		if !r.paired() || initiates(host, int(r.ms[mi].dst)) {
			break
		}
		// The peer connects for this pair, in its own window, and
		// lazyConnected posts this write then: it takes no slot here.
	}
	m := &r.ms[mi]
	h := r.f.Hosts[host]
	c, err := h.EP.Connect(now, r.f.Hosts[m.dst].Addr, service, r.mems[host])
	if err != nil {
		r.fail(err)
		return
	}
	c.Context = mi
	r.wconn[mi] = c
	h.Kick()
}

// paired reports whether lazy connections carry both writes of a pair.
func (r *fabricRun) paired() bool { n := len(r.f.Hosts); return n&(n-1) == 0 }

// initiates says which end of the pair (a, a XOR k) connects: the one
// whose bit at k's highest set bit equals the parity of k's set bits.
// Each host initiates about half its pairs (the lower index always
// initiating would leave host 0 opening every one of its connections).
func initiates(a, b int) bool {
	k := uint(a ^ b)
	hi := bits.Len(k) - 1
	return uint(a>>hi)&1 == uint(bits.OnesCount(k))&1
}

// lazyConnected handles a connection coming up during a lazy
// all-to-all: the initiator's end posts its write; with pairs, the
// accepting end keeps the connection for its own write.
func (r *fabricRun) lazyConnected(host int, now Time, c *transport.Conn) {
	if mi, ok := c.Context.(int32); ok {
		r.post(now, mi)
		return
	}
	if !r.paired() {
		return // the writer's connection, accepted: the writer holds it
	}
	hosts := len(r.f.Hosts)
	peer := int(hostIndex(c))
	r.wconn[((host^peer)-1)*hosts+host] = c // posted by lazyArrived
}

// lazyArrived posts the accepting end's write of a pair once the
// initiator's write has arrived on the connection. Posting at once on
// OpConnected loses the race with the ACCEPT: the data, sprayed over
// other paths, can reach the initiator while it still waits for the
// ACCEPT, which drops it (RxUnexpected), and the resend waits for the
// initial RTO (1 ms, no RTT sample yet): a 128-host run took 24x its
// ideal that way. The initiator's data proves it is established.
func (r *fabricRun) lazyArrived(now Time, x int32) {
	m := &r.ms[x]
	if !r.paired() || !initiates(int(m.src), int(m.dst)) {
		return
	}
	y := r.reverse(x)
	if r.ms[y].posted == 0 && r.wconn[y] != nil {
		r.post(now, y)
	}
}

// reverse is the write of the same pair in the other direction.
func (r *fabricRun) reverse(x int32) int32 {
	m := &r.ms[x]
	return int32((int(m.src^m.dst)-1)*len(r.f.Hosts) + int(m.dst))
}

// lazyDone closes a lazy connection once nothing more will use it: its
// write acked (with pairs: both writes acked, and so arrived). Closing
// when only the closer's own part is done would flush the other end's
// write, acked on the wire but not yet at its sender: a collective
// library finishes the exchange before it tears down, and so does this.
func (r *fabricRun) lazyDone(now Time, x int32) {
	m := &r.ms[x]
	if r.paired() {
		y := r.reverse(x)
		if !initiates(int(m.src), int(m.dst)) {
			x, y = y, x // x: the initiator's write, whose connection end closes
		}
		if !r.ms[x].ok || !r.ms[y].ok {
			return
		}
		r.wconn[y] = nil
	} else if !m.ok {
		return
	}
	if c := r.wconn[x]; c != nil {
		r.wconn[x] = nil
		c.Close(now)
	}
}
