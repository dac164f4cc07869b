// Package udplink is the UDP-socket backend of dataplane.Link: the fallback
// for hosts where AF_XDP is not permitted (it needs no capability at all),
// and the honest comparison on links where the copy dominates (docs/platform.md:
// for jumbo frames on veth, batched UDP moves as many bytes as AF_XDP in
// copy mode).
//
// # One receiving socket, batched
//
// A Link receives on one non-blocking UDP socket bound to
// Config.Local:Config.Port. Every MetaRoCE endpoint binds the same port on
// its own address, and every packet is sent to Dst:Port. Receive is one
// recvmmsg(2) per batch and SubmitTx one sendmmsg(2) per batch and send
// socket (one without a source-port pool, below), through raw syscalls on vectors (mmsghdr, iovec,
// sockaddr, control buffer per entry; x/sys/unix has the types but no
// wrappers) that Open builds once; the hot path only points iovecs at
// buffers and fills in addresses, and allocates nothing. Poll is one
// ppoll(2) on the socket for POLLIN, with the timeout to the nanosecond.
//
// # Path entropy: a pool of send sockets
//
// MetaRoCE uses the UDP source port as path entropy: the transport picks one
// per packet (TxPacket.SrcPort) and the fabric's ECMP hash maps it to a
// route. A socket sends from the port it is bound to, and nothing in the
// socket API changes that per packet (IP_PKTINFO chooses the source address,
// not the port; a raw socket needs CAP_NET_RAW, which defeats a
// no-privilege fallback). So with Config.SrcPorts = n the link opens n more
// sockets, send-only, bound to n consecutive ports lo..lo+n-1 on Local
// (Open slides the window past ports in use; Link.SrcPortRange says where
// it landed), and sends each packet from the socket of its SrcPort. The
// pool is bounded by telling the transport to draw its entropy from exactly
// lo..lo+n-1 (transport.Config.EntropyMin and EntropyMax, which the daemon
// sets from SrcPortRange), so every value it picks is a port the link sends
// from; a value outside the pool (an ack echoing a peer with another range)
// maps onto it by (port-lo) mod n, the same socket every time. With
// SrcPorts 0 there is no pool: every packet leaves from Port, SrcPort is
// ignored and ECMP does not spread the link's packets (Info().Why says
// which). Nothing changes on the wire: receivers never demultiplex on the
// source port, and Receive reports it as RxPacket.SrcPort, so acks echo it
// as on any backend.
//
// The send sockets receive nothing. Peers send to Port, where only the main
// socket listens; anything addressed to a pool port is dropped in the
// kernel by a classic BPF filter that accepts no packet, attached before
// the bind, so nothing ever queues on them and there is nothing to drain
// (srcports.go; TestSrcPortsReceiveNothing).
//
// Cost: SubmitTx sorts the batch by socket (a stable counting sort, no
// allocation) and makes one sendmmsg per socket the batch touches, at most
// min(n, Batch, the distinct entropy values in the batch), instead of one
// per batch; a path's packets stay in order and still form GSO runs,
// though the transport interleaves paths. Measured (a shared 2-vCPU VM:
// +-30% and worse from run to run) with BenchmarkLoopback, 64 packets of
// 1400 B per batch, both ends on one core: without GSO, 1, 4, 16 or 64
// sockets all cost 1.35-2 us per packet, since the kernel's per-datagram
// work dwarfs the ~0.3 us of each extra sendmmsg; with GSO, 1 socket (one
// run of 64) cost 0.33-0.40 us, 4 sockets 0.21-0.26, 16 sockets (runs of
// 4) 0.43-0.47, and 64 (runs of one) ~2 us. End to end, two daemons
// (which run the link without GSO) moving verified WRITEs through a star
// with 1% loss did 1.12-1.76 Gb/s from one port and 1.18-2.04 Gb/s with
// the pool (64 or 256 ports) in 8 interleaved pairs of runs: no cost that
// the noise shows. Through the leaf-spine demo's 4 spines of 250 Mb/s
// each, one port put every packet on one spine (0.14-0.23 Gb/s); a pool
// of 64 or 256 spread them 17-34% per spine (0.38-0.88 Gb/s, as AF_XDP did
// in the same hour) and a blackholed spine was routed around in 20-32 ms.
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
//   - Send: a run of consecutive packets of one socket to the same Dst, of
//     the same class and length (the last may be shorter), becomes one
//     sendmmsg entry with
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
