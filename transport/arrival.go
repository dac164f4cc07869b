package transport

import "net/netip"

// ReceiveAt is ReceivePort for a packet whose arrival time the link
// measured (the XDP program's stamp, the kernel's receive timestamp):
// arrival, on the endpoint's clock, at or before now. The receiver measures
// its acks' AckDelay from it (§5.1) and the sender its RTT samples to it
// (§5.7), so neither counts the time the packet waited in the host's
// receive ring for the engine, which is host delay, not the fabric's.
// Everything else (timers, loss detection) runs at now. An arrival of 0,
// or one after now, is now.
func (e *Endpoint) ReceiveAt(now, arrival Time, from netip.Addr, srcPort uint16, ce bool, pkt []byte) {
	if arrival <= 0 || arrival > now {
		arrival = now
	}
	e.rxArrival = arrival
	e.ReceivePort(now, from, srcPort, ce, pkt)
	e.rxArrival = 0
}

// arrival is the arrival time of the packet being received at now: the
// link's, inside ReceiveAt, else now.
func (e *Endpoint) arrival(now Time) Time {
	if a := e.rxArrival; a > 0 && a <= now {
		return a
	}
	return now
}

// ReceiveOn is ReceiveAt for a packet whose plane the link knows: the
// plane (NIC port, §7.9) it arrived on. The stateless replies it draws
// (RESET, DISCONNECT_ACK, CHALLENGE, REJECT; §7.8) go back on that plane,
// to its source address: when the packet came from a peer's address on
// another plane than 0, its plane-0 port may not reach that address at
// all. A plane the endpoint does not have is taken for plane 0.
func (e *Endpoint) ReceiveOn(now, arrival Time, plane uint8, from netip.Addr, srcPort uint16, ce bool, pkt []byte) {
	if int(plane) >= max(len(e.planeAddrs), 1) {
		plane = 0
	}
	e.rxPlane = plane
	e.ReceiveAt(now, arrival, from, srcPort, ce, pkt)
	e.rxPlane = 0
}
