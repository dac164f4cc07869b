// Package bench measures the baselines MetaRoCE is compared against, in the
// same run and over the same test hosts (internal/testnet): the raw AF_XDP
// ceiling of our socket layer, the same ceiling with github.com/asavie/xdp
// as the socket layer, and Linux TCP. Each is a function the demo calls
// with two hosts of the caller's Net; each is bounded by its context and
// its Duration, sends only between those hosts, and closes every socket,
// program and goroutine it made before it returns, on every path.
//
// # Raw AF_XDP: RawAFXDP
//
// A blaster on host A and a sink on host B, with no transport logic
// between them. Both hosts get the production steering program (bpf/),
// attached to their port through a bpf_link, and an AF_XDP socket
// (dataplane/xsk) on queue 0 registered in its socket map: B's program
// redirects the frames to B's socket, A's redirects the latency replies to
// A's. ARP and neighbour discovery still reach the kernels, so the same code
// runs across a Star's switch, which routes the frames like any others
// (A addresses them to its next hop: B on a Pair, the switch on a Star).
//
// Rate. Every frame of A's UMEM is built once, checksums included, before
// the run. Per packet the blaster writes 16 bytes, a sequence number and its
// complement, which leaves the UDP checksum valid (payload.go says why), so
// the figure is the socket layer's and the kernel's, not a header builder's.
// The blaster sends batches of 64 for Duration; the first tenth (at most
// 200 ms) is warm-up and not counted; then the blaster waits for its TX ring
// to empty and the sink for the last frames, and loss is what was sent and
// never verified at B. The sink checks each frame: its length, kind and
// per-run tag, the number against its complement, and that the numbers rise
// (one queue, one path: any reordering or duplicate is an error). Only
// frames that pass are counted; a run with any that fail returns its result
// with ErrSequence, so a broken run cannot report a fake rate. Gbps counts
// UDP payload bits (what a transport could put in those frames), FrameGbps
// whole Ethernet frames. Lost frames are attributed where the counters allow:
// how many B's program redirected, B's socket's XDP_STATISTICS, and the
// drop counters of every interface on the path.
//
// Jumbo frames. RawOptions.MTU sets the frame to MTU+14 bytes, so the
// baseline runs the frames MetaRoCE runs at that MTU. Above 3500 (or for a
// frame over the 3840 bytes one 4096-byte chunk receives) our layer runs
// multi-buffer, as the AF_XDP backend does: the steering program's frags
// variant, XDP_USE_SG, and each frame built once in a TX span of
// consecutive chunks and sent as the descriptor chain Split cuts (3 at MTU
// 9000, 2 at 4200). The sink verifies a chain in place, without copying
// it: kind, tag and numbers from its first buffer, the length from the sum
// of its descriptors. asavie/xdp has no XDP_USE_SG and refuses such runs.
//
// Latency. A sends one small probe, B's reflector swaps its Ethernet and IP
// addresses in place (the checksums are invariant under the swap) and
// sends it back, and A takes the round trip; RoundTrips times, or until
// Duration, a probe unanswered in 100 ms counting as lost. Both sides
// busy-spin. p50 and p99 by nearest rank.
//
// Threads. The sending and receiving loops each run on a locked OS thread;
// with two or more CPUs they are pinned to two different ones
// (sched_setaffinity), and the result says so. On veth the receive side's
// kernel work (B's XDP program and the copy into B's UMEM) runs in softirq
// on the sender's CPU, inside its sendto, so the two spinning threads and
// the kernel share two cores. Pinned threads cannot escape another busy
// process on their core: on a shared machine that shows as B's fill ring
// running dry (sink_drops) and as a long tail of latency.
//
// What it does not measure: any transport work (headers, CRC32C,
// acknowledgements, timers, memory registration and the copy into it);
// more than one queue or flow; zero-copy (veth refuses it: copy mode, with
// the kernel copying each frame once on each side, which dominates at 1514
// bytes). It is the ceiling the dataplane cannot exceed on these links.
//
// # The same with asavie/xdp: RawAsavie
//
// The same frames, loops, threads, ring sizes, UMEM and XDP program, with
// asavie/xdp v0.3.3 (archived) providing the socket, UMEM and rings, for the
// comparison with our layer. Its known hazards are fenced off:
//
//   - Its default program redirects every packet of the queue, ARP and ND
//     included, and it attaches through netlink, removing whatever program
//     was there first; its Detach loops forever in generic mode. None of
//     it is used: our program is attached with bpf_link and asavie's
//     socket fd goes into our socket map.
//   - Transmit panics on any sendto errno but EINTR, EAGAIN and EBUSY
//     (ours counts ENOBUFS as "try again"). Every call is wrapped: a panic
//     becomes the run's error.
//   - Its Close (and a failing NewSocket) unmaps the UMEM but not the four
//     ring mappings, which keep the socket alive: still bound to its queue,
//     so the next bind there fails with EBUSY for the life of the process,
//     and with its UMEM pinned (TestAsavieCloseLeavesRings shows it). The
//     mappings are found in /proc/self/maps by the socket's inode and
//     unmapped after Close.
//   - NewSocket does not retry a bind that fails with EBUSY, which the
//     kernel answers for some milliseconds after the queue's previous
//     socket closed: it is retried here for up to 500 ms.
//   - It binds without need_wakeup and makes a sendto per TX batch; on
//     veth in copy mode our layer does too (the flag is always set), so
//     that costs it nothing here. It has no TX budget option: the same
//     XDP_MAX_TX_SKB_BUDGET as ours is set on its fd.
//   - Its ring indices are read and written with plain loads and stores,
//     no atomics or barriers. On amd64 (ordered stores and loads) and with
//     Go's compiler, which does not cache such loads across loop
//     iterations, it works; neither is a guarantee, and on arm64 the
//     kernel could see a descriptor before its contents.
//   - GetDescs, its only way to learn which frames are free (Complete does
//     not return addresses), scans a []bool of every frame: O(frames) per
//     call. That is its API's cost and is part of the comparison.
//
// # Linux TCP: TCP
//
// A Go sender on A and receiver on B, over Streams connections opened on
// threads inside the hosts' namespaces, through the caller's topology: on a
// Star, through the switch namespace and whatever loss or rate limit is
// set on it. It reports application bytes received per second after a
// warm-up, and the senders' retransmissions (tcpi_total_retrans).
//
// Offloads decide what the switch's loss means. With TSO/GSO on, the
// kernel moves up to 64 KB super-packets through the veths, and the
// switch's nftables rule drops skbs, so a 1% drop takes out 1% of the
// super-packets, each of which is many wire packets' worth of a burst.
// NoOffloads turns TSO, GSO and GRO off on every veth of the path (left off
// afterwards) so the drop is per packet, like a real switch's; the result
// reports the state it ran with either way, read back with ethtool. The
// default is what users get: a new veth has TSO and GSO on and GRO off.
//
// What it does not measure: iperf3's C sender (Go's costs a little more
// CPU per byte), TCP over a real NIC, or any congestion control but the
// kernel's default (cubic).
package bench
