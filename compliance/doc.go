// Package compliance is a packet-level conformance suite for MetaRoCE v1
// (docs/spec.md): it plays the peer of an implementation under test, one
// crafted packet at a time, and checks what comes back, and what must not.
//
// # Mechanism
//
// The suite needs nothing from the target but its address, its MetaRoCE
// port and, for the memory cases, a description of the memory it exposes
// (docs/compliance.md says what a target provides; metaroced provides it
// through its control socket's "expose" op). It imports wire/ to encode
// and parse packets, and nothing of the implementation.
//
// It talks to the target over plain UDP sockets: one bound to the local
// address and the MetaRoCE port receives everything, since every packet
// an endpoint sends goes to its peer's configured port (§2.2); sending
// sockets are bound to other source ports, because the UDP source port is
// the path entropy (§2.3), and each carries the TOS byte a case asks for
// (ECT(0), or CE for the ECN cases, §2.4). The receiving socket reports
// each packet's TOS (IP_RECVTOS) and source port, so the cases can check
// DSCP and ECN (§2.4) and the entropy echo (§5.5).
//
// A case opens its own connection (a full CONNECT, CHALLENGE, CONNECT,
// ACCEPT exchange, §7.3) with a random connection id, so packets of other
// cases, late acks and retransmissions included, never match its
// expectations: every expectation filters on the connection id. A case
// ends by closing its connections (DISCONNECT, §7.7), so the target does
// not keep retransmitting to a suite that stopped listening.
//
// Each case cites the clause it checks (§n.m). Expectations are of two
// kinds: a reply within Options.Timeout (generous: the spec's bounds are
// microseconds, a loaded CI machine is not), and silence for Options.Quiet
// where a packet must draw nothing. A silence check is only meaningful
// where a conforming target would have answered at once, so most cases
// pair a malformed packet with the ACK_REQ flag or with a PROBE after it:
// the ack that follows shows the target was listening and what it
// recorded.
//
// Requirements at SHOULD level that a target does not meet are reported
// as warnings, not failures; MAY behaviour is checked only for its form
// when it happens. Clauses that the wire cannot show (logging, what a
// sender does on its own schedule, statistical bounds) are listed in
// NotCovered with the reason, and a test checks that every normative
// clause of docs/spec.md has a case or such an entry.
package compliance
