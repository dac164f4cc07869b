// Package transport is the MetaRoCE reliable transport as a pure state
// machine: it is handed packets, the time and application requests, and it
// returns packets to send, completions and the next time it wants to be
// woken. It never reads a clock, touches a socket, starts a goroutine or
// sleeps, so the same code runs in unit tests against an in-memory link, in
// the virtual-time fabric simulator (sim/) and on AF_XDP rings (dataplane/).
//
// # Driving an Endpoint
//
// One Endpoint serves one local address. Its owner (one goroutine; nothing
// here is safe for concurrent use) calls, in a loop:
//
//	ep.Receive(now, from, ce, pkt) // for each received UDP payload
//	for { d, ok := ep.Transmit(now, buf); if !ok { break }; send(buf[:d.Len]) }
//	if now >= ep.NextTimeout() { ep.Timeout(now) }
//	n := ep.PollCompletions(cqes)
//
// Transmit writes one packet straight into the caller's buffer (a UMEM frame
// in the dataplane), so packets are never queued inside the transport: the
// state says what is owed (acks, nacks, retransmissions, new data) and
// Transmit materialises it on demand. That keeps memory bounded by state,
// not by backlog, and lets the caller stop when its TX ring is full.
//
// # Reliability (docs/spec.md §8)
//
// Each direction of a connection numbers its packets with a PSN and each
// transmission, on the logical path it takes, with a per-path sequence
// number that is never reused, not even for a retransmission (as QUIC's
// packet numbers). The receiver places every packet on arrival, in any
// order, dedups by PSN with a window bitmap, and acks per path: the highest
// path sequence seen plus a 256-bit trailing bitmap. Because one path's
// packets keep their order in an ECMP fabric, the sender reads a hole in a
// path's bitmap that has been overtaken by ReorderPackets later arrivals, or
// that is older than the path's RTT plus a reorder allowance, as a loss and
// resends that PSN at once, on another path. A retransmission timeout
// (RFC 6298 estimator, exponential backoff, retry limit) covers tail losses
// and dead paths.
//
// # Paths (§8.7, paths.go)
//
// Each connection sprays over Paths logical paths (entropy values), picking
// per packet the cheaper of two random active paths by in-flight packets,
// RTT, marks and losses. A path that loses repeatedly, goes silent while
// other paths' acks overtake it, or stays far slower than the others is
// suspect: it carries no data and is probed, then restored or retired and
// replaced by fresh entropy. Acks echo the entropy of the data they speak
// for (ReceivePort), so one entropy value steers both directions. Mode
// rocev2 is the classic baseline in the same code: one path, go-back-N, no
// repathing (§8.8).
//
// # Messages, streams and completions (§9)
//
// Messages (WRITE, WRITE with immediate, READ, SEND) are cut into packets
// that each carry what placement needs. Every message belongs to a stream;
// completions are reported in posting order within a stream and never wait
// on another stream. At the receiver, messages of a stream take effect (a
// READ is served, a receive completion is reported) in stream order, so a
// READ after a WRITE on the same stream reads what the WRITE wrote.
package transport
