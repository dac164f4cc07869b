// Package udplink is the UDP-socket backend of dataplane.Link: the fallback
// for hosts where AF_XDP is not permitted (it needs no capability at all),
// and the honest comparison on links where the copy dominates (docs/platform.md:
// for jumbo frames on veth, batched UDP moves as many bytes as AF_XDP in
// copy mode).
//
// # One socket, batched
//
// A Link is one non-blocking UDP socket bound to Config.Local:Config.Port.
// Every MetaRoCE endpoint binds the same port on its own address, and every
// packet is sent to Dst:Port. Receive is one recvmmsg(2) and SubmitTx one
// sendmmsg(2) per batch, through raw syscalls on vectors (mmsghdr, iovec,
// sockaddr, control buffer per entry; x/sys/unix has the types but no
// wrappers) that Open builds once; the hot path only points iovecs at
// buffers and fills in addresses, and allocates nothing. Poll is one
// ppoll(2) on the socket for POLLIN, with the timeout to the nanosecond.
//
// # No path entropy on this backend
//
// MetaRoCE uses the UDP source port as path entropy: the transport picks one
// per packet (TxPacket.SrcPort) and the fabric's ECMP hash maps it to a
// route. A socket sends from the port it is bound to, and nothing in the
// socket API changes that per packet (IP_PKTINFO chooses the source address,
// not the port). The ways out were all worse: one socket per source port
// seen is unbounded; a fixed pool of send-only sockets on other ports costs
// one sendmmsg per socket touched per batch and still collapses the
// transport's entropy values onto a few buckets; a raw socket needs
// CAP_NET_RAW, which defeats a no-privilege fallback. So this backend sends
// every packet from Port and ignores SrcPort: on a multipath fabric, all of
// a link's packets to one peer take one route, and spraying and repathing
// have no effect on where they go (they still work, they just do not
// spread). Info().Why says so. It is interoperable, because receivers never
// demultiplex on the source port.
//
// # DSCP and ECN
//
// Each sendmmsg entry carries an IP_TOS (IPv4) or IPV6_TCLASS (IPv6) control
// message, in its own preallocated control buffer: DSCPData or DSCPControl
// (by TxPacket.Control) with ECT(0). The alternative, one socket per class,
// would need SO_REUSEPORT to bind the port twice, and the kernel would then
// split reception between the two. The socket has IP_RECVTOS or
// IPV6_RECVTCLASS on, so each received datagram comes with its TOS, parsed
// from the slot's control buffer without allocating; RxPacket.CE is set when
// its ECN field is CE.
//
// # GSO and GRO
//
// With Config.GSO, and where the kernel has them (Linux 4.18 and 5.0), the
// link uses UDP segmentation offload on send and UDP GRO on receive:
//
//   - Send: a run of consecutive packets to the same Dst, of the same class
//     and length (the last may be shorter), becomes one sendmmsg entry with
//     one iovec per packet and a UDP_SEGMENT control message; the kernel (or
//     the NIC) cuts it back into the same datagrams. This pays off exactly
//     when the engine sends trains of full-size packets to one peer, which
//     is what a large WRITE is; mixed traffic degrades to one entry per
//     packet. If the kernel refuses a run, the rest of the batch goes out
//     without GSO (see SubmitTx).
//   - Receive: the kernel may hand up several datagrams of one flow as one,
//     with a UDP_GRO control message giving the segment size. Receive splits
//     it into one RxPacket per segment, all pointing into the slot, so each
//     receive slot is 64 KiB instead of MaxPayload. All segments share one
//     IP header, so one CE applies to all of them (GRO does not merge
//     datagrams whose TOS differs).
//
// Link.Offloads and Info().Why say which are on.
//
// # Buffer ownership
//
// Receive buffers are 2*Batch slots; a packet's Payload points into its
// slot and stays valid until the packet is released. Receive never gives
// the kernel a slot that is not free, and a slot is free when every packet
// from it has been released (see rx.go for the states). Release makes no
// syscall. Transmit buffers are Batch slots of MaxPayload bytes; ReserveTx
// hands them out and SubmitTx takes back all of its batch, since sendmmsg
// copies. Handles carry a generation, so a double release or submit panics
// rather than corrupting a buffer in use.
//
// # Bad input and counters
//
// A datagram longer than a slot is truncated by the kernel (MSG_TRUNC); one
// longer than MaxPayload in a 64 KiB GRO slot is caught by Receive. Both
// are dropped and counted, never passed up. Counters are single-writer
// atomics, written once per batch by the engine goroutine and readable from
// any goroutine.
package udplink
