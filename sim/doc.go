// Package sim is a discrete-event network simulator that drives real
// transport.Endpoints in virtual time.
//
// A Network holds hosts (each an Endpoint with an address and a NIC) and
// one-way links with a rate, a propagation delay and seeded impairments:
// random loss, reordering (a packet is held back by a random extra delay),
// duplication and corruption (one bit flipped, which the CRC32C must catch).
// Time only moves when the next event is taken from the event queue (a
// radix heap, eventq.go: FIFO among equal times), so a run is
// deterministic for a seed and as fast as the events allow.
//
// The NIC model pulls: a host asks its Endpoint for a packet only when its
// NIC is free, and the NIC is busy for the packet's serialisation time, so
// the sender's own window and the link rate, not an unbounded queue, bound
// what is in flight. Packet buffers come from a free list and events are
// values in the queue's bucket slices: the event loop allocates nothing per packet
// (BenchmarkFabricEventLoop: 0 allocs per event).
//
// Fabrics (fabric.go) add switches: a link may end at a Switch instead
// of a host, and the packet's arrival there is an event on which the
// switch picks its next link, by a range test on the destination host
// (hosts are numbered so every switch reaches a contiguous range below
// it) or, upwards, by an ECMP hash of (source, destination, UDP source
// port) under the switch's own seed. NewFabric builds two- and
// three-tier Clos fabrics of P planes; RunFabric runs a collective
// (workload.go, alltoall.go) of WRITEs with immediate on it, with
// background load and faults, and reports completion against a lower
// bound, message completion quantiles and link utilisation
// (docs/sim.md). ConnStateBytes measures what a connection costs
// (docs/scale.md).
package sim
