//go:build ignore

// ecn_mark.c makes a Linux port behave like a datacenter switch's output
// port for ECN: it keeps a virtual queue that drains at the port's rate,
// marks CE on ECN-capable packets that find it above a threshold, and drops
// packets that would overflow the buffer. doc.go explains the mechanism and
// why it runs beside tbf; this file is compiled by bpf2go (see gen.go) and
// the object is committed.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// Buckets of the histogram of the backlog arriving packets found; bucket b
// holds backlogs in [b, b+1) * limit_bytes / HIST_BUCKETS. Go reads the
// number from the generated bindings' map spec.
#define HIST_BUCKETS 256

// NS_PER_SEC bounds the idle time drained in one step: after a second idle
// the queue is empty at any rate the loader accepts (at most 100 Gb/s, so
// the product idle_ns * rate_bytes fits in 64 bits).
#define NS_PER_SEC 1000000000ULL

// port_config is written once by the loader, before the program is attached.
struct port_config {
	__u64 rate_bytes;  // drain rate, bytes per second
	__u64 ecn_bytes;   // mark an ECT packet that finds more than this queued
	__u64 limit_bytes; // drop a packet that would take the queue above this
};

// port_state is the virtual queue and its counters, one per port. Packets
// leave on several CPUs at once, so every update holds the lock.
struct port_state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 queue_bytes;  // virtual backlog after the last packet
	__u64 last_ns;      // bpf_ktime_get_ns of the last packet
	__u64 packets;      // packets offered (passed + dropped)
	__u64 bytes;        // bytes offered
	__u64 marked;       // CE marks set (or found set) above the threshold
	__u64 not_ect;      // above the threshold but not ECN-capable: unmarked
	__u64 dropped;      // dropped: the buffer was full
	__u64 peak_bytes;   // largest queue_bytes seen
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_state);
} state SEC(".maps");

// Per-CPU, so counting a packet's bucket needs no lock; Go sums the CPUs.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} backlog_hist SEC(".maps");

SEC("tc")
int ecn_mark(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct port_config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct port_state *st = bpf_map_lookup_elem(&state, &zero);
	if (!cfg || !st || cfg->rate_bytes == 0 || cfg->limit_bytes == 0)
		return TC_ACT_OK; // not configured: a plain port

	__u64 now = bpf_ktime_get_ns();
	__u64 len = skb->len;
	__u64 found;
	int drop = 0, over = 0;

	bpf_spin_lock(&st->lock);
	__u64 idle = now > st->last_ns ? now - st->last_ns : 0;
	if (idle >= NS_PER_SEC) {
		st->queue_bytes = 0;
	} else {
		__u64 drained = idle * cfg->rate_bytes / NS_PER_SEC;
		st->queue_bytes = drained >= st->queue_bytes ? 0 : st->queue_bytes - drained;
	}
	// Only a drain that moved the queue advances the clock, so that
	// packets closer together than one byte's time still drain.
	if (idle * cfg->rate_bytes >= NS_PER_SEC)
		st->last_ns = now;
	found = st->queue_bytes;
	st->packets++;
	st->bytes += len;
	if (found + len > cfg->limit_bytes) {
		drop = 1;
		st->dropped++;
	} else {
		st->queue_bytes = found + len;
		if (st->queue_bytes > st->peak_bytes)
			st->peak_bytes = st->queue_bytes;
		over = found > cfg->ecn_bytes;
	}
	bpf_spin_unlock(&st->lock);

	__u32 b = found * HIST_BUCKETS / cfg->limit_bytes;
	if (b >= HIST_BUCKETS)
		b = HIST_BUCKETS - 1;
	__u64 *h = bpf_map_lookup_elem(&backlog_hist, &b);
	if (h)
		(*h)++;

	if (drop)
		return TC_ACT_SHOT;
	if (over) {
		// 1: the packet now carries CE (it was ECT, or CE already);
		// 0: not IP, not ECN-capable, or its header is not writable.
		if (bpf_skb_ecn_set_ce(skb))
			__sync_fetch_and_add(&st->marked, 1);
		else
			__sync_fetch_and_add(&st->not_ect, 1);
	}
	return TC_ACT_OK;
}
