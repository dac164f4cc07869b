// Package dataplane runs the MetaRoCE transport on real links: one Engine
// per NIC queue, each a goroutine locked to its OS thread that owns its
// transport.Endpoint outright, so nothing on the per-packet path takes a
// lock.
//
// A loop iteration reads the clock, takes a batch of received
// packets from its Link, reads the clock again (the batch's arrival time,
// from which acks measure their AckDelay: docs/spec.md §5.1, for packets
// whose link did not stamp their arrival: RxPacket.Arrival) and hands
// each to the transport (which places
// payload into registered memory), gives the frames back, fires due
// timers, reports completions to its Driver (the daemon's: the
// applications' shared-memory queue pairs), then reserves batches of at
// most 16 transmit buffers, lets the transport write packets straight
// into them, reading the clock every 4 packets so each is stamped within
// a few microseconds of its hand-off (§4.2), and submits each batch with
// at most one syscall. The link bounds what it holds uncompleted (the
// AF_XDP link's TxBudget), so a packet's stamp is also close to its
// departure; while the budget is spent the engine keeps polling.
//
// Adaptive polling, in three phases. While iterations find work the
// engine spins. Idle, it first spins hot for SpinIterations iterations
// (or SpinTime); then, until YieldTime has passed since its last work, it
// keeps polling but yields the CPU (sched_yield) between iterations, since
// work is expected (a peer's answer, an application's next request) and
// a host's two cores are shared by two daemons and their applications: a
// yielding poller hands the core over in about a microsecond and takes it
// back as soon as the others stop, where each sleeping hop of a round trip
// costs a wake-up (~36 us on a VM whose idle vCPU halts). That holds while
// what shares the core yields too: a yield that loses the CPU for long
// (over ring.YieldStall: a thread that does not yield holds it, and the
// scheduler pushes a yielder back a whole time slice, where it wakes a
// sleeper ahead) ends the yielding for that gap, and while most gaps' yields
// stall the engine sleeps straight after the hot spin (ring.YieldGate,
// which probes one gap in 16). A yielding engine keeps its P, so every
// 200 us it looks whether the process's goroutines keep waiting for one
// and hands it over if they do. After that it
// blocks in Link.Poll (and, for a Sleeper driver, on its wake-up
// descriptor) until a packet may have arrived, the next transport timer,
// or MaxSleep, whichever is first. An idle engine therefore costs no CPU
// after a bounded spin.
//
// Links: the AF_XDP backend (dataplane/afxdp), the UDP-socket backend
// (dataplane/udplink) and an in-memory twin (MemLink) for tests all
// implement Link, so the engine cannot tell them apart.
package dataplane
