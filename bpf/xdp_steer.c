//go:build ignore

// xdp_steer.c steers MetaRoCE packets to the AF_XDP socket of the RX queue
// they arrived on and leaves every other packet to the kernel. The mechanism,
// the counters and the two program variants are described in doc.go; this
// file is compiled by bpf2go (see gen.go) and the object is committed.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// The UDP destination port MetaRoCE listens on, in host byte order. It lives
// in .rodata and is rewritten by the loader before the program is loaded
// (cilium/ebpf VariableSpec.Set), so the verifier sees a constant and no map
// lookup is paid per packet. Changing the port means loading a new program.
volatile const __u16 metaroce_port = 4792;

// MetaRoCE header facts the filter relies on. The full header is parsed in
// user space; here only its length and version byte are checked.
#define METAROCE_VERSION 1
#define METAROCE_MIN_PAYLOAD 12

// IPv4 frag_off bits (include/net/ip.h, not part of the UAPI headers).
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

// Queues the socket map can hold; Options.Queues overrides it at load time.
// rx_queue_index values at or above it miss the map and fall back to the
// kernel.
#define DEFAULT_QUEUES 256

// Counter indexes. The Go side reads these through the generated steerCounter
// type, so the order here is the only definition.
enum counter {
	COUNTER_REDIRECTED = 0,   // MetaRoCE, handed to the queue's socket
	COUNTER_PASSED,           // not MetaRoCE: other port, protocol, ethertype
	COUNTER_DROPPED_SHORT,    // to the port, payload < 12 bytes or truncated
	COUNTER_DROPPED_VERSION,  // to the port, first payload byte != 1
	COUNTER_DROPPED_FRAGMENT, // to the port, first fragment of an IPv4 datagram
	COUNTER_REDIRECT_FAILED,  // MetaRoCE, but no socket for the queue: passed
	COUNTER_MAX,
};

// Puts enum counter into BTF, where bpf2go finds it and generates the Go
// constants (steerCounterCOUNTER_*). Keying the counters map by the enum
// would do the same, but the kernel wants an int key in an array map's BTF,
// and the loader then quietly creates the map without BTF.
const enum counter counter_max __attribute__((used)) = COUNTER_MAX;

// RX queue index -> AF_XDP socket. Sizes rather than BTF types: the kernel
// refuses BTF for an XSKMAP, and the loader would retry without it.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, DEFAULT_QUEUES);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32)); // a socket fd on update
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// The 802.1Q tag that follows the MAC addresses; the kernel's struct vlan_hdr
// is not in the UAPI headers.
struct vlanhdr {
	__be16 tci;
	__be16 proto;
};

static __always_inline void count(enum counter c)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	// Per-CPU slot, and XDP does not nest on a CPU: a plain add is exact.
	if (v)
		*v += 1;
}

// hdr returns a pointer to len bytes at off, or NULL when the frame is
// shorter. The bytes are normally read in place. A multi-buffer frame keeps
// only its first buffer between data and data_end, so the frags variant copies
// a header that does not lie there into buf. Drivers normally put the first
// few KB in the first buffer, so that is a cold path, kept for correctness.
static __always_inline void *hdr(struct xdp_md *ctx, __u32 off, __u32 len,
				 void *buf, const int frags)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	if (data + off + len <= data_end)
		return data + off;
	if (frags && bpf_xdp_load_bytes(ctx, off, buf, len) == 0)
		return buf;
	return NULL;
}

static __always_inline __u32 frame_len(struct xdp_md *ctx, const int frags)
{
	if (frags)
		return bpf_xdp_get_buff_len(ctx);
	return ctx->data_end - ctx->data;
}

static __always_inline int pass(void)
{
	count(COUNTER_PASSED);
	return XDP_PASS;
}

static __always_inline int drop(enum counter why)
{
	count(why);
	return XDP_DROP;
}

static __always_inline int steer(struct xdp_md *ctx, const int frags, const int stamp)
{
	// One scratch area for the frags copy path; only one header is alive
	// at a time.
	union {
		struct ethhdr eth;
		struct vlanhdr vlan;
		struct iphdr ip;
		struct ipv6hdr ip6;
		struct udphdr udp;
		__u8 payload[METAROCE_MIN_PAYLOAD];
	} buf;
	__u32 off = sizeof(struct ethhdr);
	__u16 proto;
	int first_fragment = 0;

	struct ethhdr *eth = hdr(ctx, 0, sizeof(*eth), &buf, frags);
	if (!eth)
		return pass();
	proto = eth->h_proto;

	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct vlanhdr *vlan = hdr(ctx, off, sizeof(*vlan), &buf, frags);
		if (!vlan)
			return pass();
		proto = vlan->proto;
		off += sizeof(*vlan);
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = hdr(ctx, off, sizeof(*ip), &buf, frags);
		__u32 ihl;

		if (!ip || ip->protocol != IPPROTO_UDP)
			return pass();
		// A non-first fragment carries no UDP header, so its port is
		// unknown: it goes to the kernel, which discards it when the
		// first fragment (dropped below) never arrives.
		if (ip->frag_off & bpf_htons(IP_OFFSET))
			return pass();
		first_fragment = (ip->frag_off & bpf_htons(IP_MF)) != 0;
		ihl = ip->ihl * 4;
		if (ihl < sizeof(*ip))
			return pass(); // malformed; the kernel drops it
		off += ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = hdr(ctx, off, sizeof(*ip6), &buf, frags);

		// Extension headers are not walked: MetaRoCE peers send UDP
		// directly after the fixed header.
		if (!ip6 || ip6->nexthdr != IPPROTO_UDP)
			return pass();
		off += sizeof(*ip6);
	} else {
		return pass();
	}

	struct udphdr *udp = hdr(ctx, off, sizeof(*udp), &buf, frags);
	if (!udp || udp->dest != bpf_htons(metaroce_port))
		return pass();

	// From here on the packet is addressed to MetaRoCE: anything wrong
	// with it is dropped and counted rather than left to the kernel,
	// which has no socket on the port.
	if (first_fragment)
		return drop(COUNTER_DROPPED_FRAGMENT);

	__u32 udp_len = bpf_ntohs(udp->len);
	if (udp_len < sizeof(*udp) + METAROCE_MIN_PAYLOAD ||
	    udp_len > frame_len(ctx, frags) - off)
		return drop(COUNTER_DROPPED_SHORT);

	__u8 *payload = hdr(ctx, off + sizeof(*udp), METAROCE_MIN_PAYLOAD, &buf, frags);
	if (!payload)
		return drop(COUNTER_DROPPED_SHORT);
	if (payload[0] != METAROCE_VERSION)
		return drop(COUNTER_DROPPED_VERSION);

	// The arrival time, in the frame's metadata (the 8 bytes before the
	// packet, which AF_XDP copies into the UMEM frame with it): the
	// engine measures AckDelay and RTT samples from it (docs/spec.md
	// §5.1), so neither includes the time the packet then waits in the
	// RX ring for a busy or descheduled engine. A driver without
	// metadata support refuses the adjustment, and the engine then
	// stamps the packet itself when it takes it from the ring. A
	// multi-buffer frame is stamped too: the metadata sits before its
	// first buffer, and AF_XDP copies it into the chain's first chunk.
	// A kernel that refuses the helper to XDP programs altogether (seen:
	// 6.18.44-fc, "program of this type cannot use helper
	// bpf_xdp_adjust_meta") gets the variants built with stamp 0, which
	// never call it (steer.go falls back to them).
	if (stamp && bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u64)) == 0) {
		void *data = (void *)(long)ctx->data;
		__u64 *meta = (void *)(long)ctx->data_meta;

		if ((void *)(meta + 1) <= data)
			*meta = bpf_ktime_get_ns();
	}

	// The socket for this queue, or XDP_PASS when the slot is empty (no
	// socket bound yet, or the queue index is beyond the map).
	long action = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	count(action == XDP_REDIRECT ? COUNTER_REDIRECTED : COUNTER_REDIRECT_FAILED);
	return action;
}

SEC("xdp")
int xdp_steer(struct xdp_md *ctx)
{
	return steer(ctx, 0, 1);
}

// Same program, loaded with BPF_F_XDP_HAS_FRAGS (cilium/ebpf sets the flag
// from the section name) so it can attach to an interface whose MTU does not
// fit one page.
SEC("xdp.frags")
int xdp_steer_frags(struct xdp_md *ctx)
{
	return steer(ctx, 1, 1);
}

// The two variants again without the arrival stamp, for kernels that
// refuse bpf_xdp_adjust_meta to the program type: the engine then times
// each packet when it takes it from the ring.
SEC("xdp")
int xdp_steer_nostamp(struct xdp_md *ctx)
{
	return steer(ctx, 0, 0);
}

SEC("xdp.frags")
int xdp_steer_frags_nostamp(struct xdp_md *ctx)
{
	return steer(ctx, 1, 0);
}
