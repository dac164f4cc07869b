// Package dataplane runs the MetaRoCE transport on real links: one Engine
// per NIC queue, each a goroutine locked to its OS thread that owns its
// transport.Endpoint outright, so nothing on the per-packet path takes a
// lock.
//
// A loop iteration reads the clock once, takes a batch of received
// packets from its Link and hands each to the transport (which places
// payload into registered memory), gives the frames back, fires due
// timers, reports completions to its Driver (the daemon's: the
// applications' shared-memory queue pairs), then reserves a batch of transmit
// buffers, lets the transport write packets straight into them, and
// submits the batch with at most one syscall.
//
// Adaptive polling: while iterations find work the engine spins; after
// SpinIterations idle iterations (or SpinTime) it blocks in Link.Poll until a packet may
// have arrived, the next transport timer, or MaxSleep, whichever is first.
// An idle engine therefore costs no CPU, which matters on two-core hosts
// running two daemons and their applications.
//
// Links: the AF_XDP backend (dataplane/afxdp), the UDP-socket backend
// (dataplane/udplink) and an in-memory twin (MemLink) for tests all
// implement Link, so the engine cannot tell them apart.
package dataplane
