// Package ecnmark is a tc egress program that makes a Linux interface mark
// and drop as a datacenter switch's output port does: ECN CE above a queue
// threshold, tail drop above a buffer limit.
//
// # Why a program, and why beside tbf
//
// The kernels the tests run on have no ECN-marking qdisc (no red, codel,
// fq_codel: see docs/platform.md); only tbf and htb. tbf holds and paces
// the packets at the port's rate, which is what makes a queue build, but
// it cannot mark. So the port is two parts that see the same packets:
//
//   - this program, at the interface's tc egress hook (tcx, bpf_link), runs
//     for every packet before the qdisc takes it. It keeps a virtual queue:
//     the backlog in bytes, drained at the configured rate for the time
//     since the previous packet (bpf_ktime_get_ns), plus each packet's
//     length (skb->len, Ethernet header included). A packet that finds more
//     than ECNBytes queued is marked CE with bpf_skb_ecn_set_ce if it is
//     ECN-capable (ECT(0), ECT(1)); one that would take the queue above
//     LimitBytes is dropped (TC_ACT_SHOT) and not queued.
//   - the tbf root qdisc at the same rate, with a tiny bucket and a limit
//     of LimitBytes plus the bucket (internal/testnet sets it up), really
//     delays the packets.
//
// The virtual queue and tbf's backlog agree to within tbf's bucket (a few
// packets) as long as both drain at the same rate, which is the point of
// configuring both from one rate. They part when tbf drains late: its
// watchdog timer fires late on a loaded machine, so its real backlog runs
// ahead of the virtual one, the marker marks less than the real queue
// calls for, and tbf's limit drops what the buffer cannot hold. The
// incast demo reports both queues and both drop counts, so a run on a
// busy machine shows it.
//
// Counting departures instead (admitted less what the veth sent, from an
// fentry program on veth_xmit) would make the queue the real backlog; it
// was tried and the kernels these tests run on refuse to load tracing
// programs (EPERM before the verifier, with lockdown forced to
// integrity), so the virtual queue it is. What the program decides from is what a
// switch decides from: the backlog a packet finds on arrival. It is exact
// per packet, where sampling the qdisc's backlog (Counters cannot, tc -s
// can) sees only the instants it happens to look.
//
// # What it counts
//
// Counters: packets and bytes offered, marks, drops, packets above the
// threshold that were not ECN-capable (left unmarked), and the largest
// virtual backlog. A histogram of the backlog each arriving packet found
// (HistBuckets linear buckets up to LimitBytes, per-CPU) gives the queue's
// quantiles as the simulator defines them (sim/incast.go: the backlog
// arriving packets found), each a bucket's upper edge.
//
// The queue state sits under a bpf_spin_lock, since packets leave on both
// CPUs at once; the mark counter is added atomically after the helper call
// (helpers may not be called while holding the lock).
//
// # GSO
//
// With veth offloads on, one skb may be a 64 KB GSO super-packet: it is
// counted, marked (every segment then carries CE) or dropped whole.
// Tests that want per-wire-packet decisions turn offloads off.
package ecnmark
