package dataplane

import (
	"net/netip"
	"time"
)

// RxPacket is one received MetaRoCE packet. Payload (the UDP payload) stays
// valid until the packet is given back with Link.Release.
type RxPacket struct {
	Payload []byte
	From    netip.Addr
	CE      bool   // the IP header carried ECN CE
	SrcPort uint16 // the UDP source port: the path entropy
	Handle  uint64 // the backend's reference to the frame
	// Arrival is when the packet reached the host, in CLOCK_MONOTONIC
	// nanoseconds (the XDP program's bpf_ktime_get_ns, or the kernel's
	// receive timestamp); 0 when the link cannot tell, and the engine
	// then takes the time it received the batch.
	Arrival int64
	// Plane is the plane (NIC port, docs/spec.md §7.9) the packet
	// arrived on; only a PlaneLink sets it, 0 otherwise. The replies a
	// packet draws go back on its plane.
	Plane uint8
}

// TxPacket is one packet to send. ReserveTx sets Buf to the room for the
// UDP payload (inside the frame that will carry it, so the transport
// writes its packet straight into place); the engine writes the packet
// there and sets Len, Dst, SrcPort and Control.
type TxPacket struct {
	Buf     []byte
	Len     int
	Dst     netip.Addr
	SrcPort uint16 // path entropy
	Control bool   // ack, nack or connection packet: the control DSCP
	// Plane is the plane the packet leaves on (transport.Datagram.Plane,
	// docs/spec.md §7.9); only a PlaneLink reads it.
	Plane  uint8
	Handle uint64
}

// LinkInfo says what a link is, for logs and the demo's JSON.
type LinkInfo struct {
	Backend  string // "afxdp", "udp" or "mem"
	Iface    string
	Queue    int
	XDPMode  string // "native", "generic" or "" when no XDP program
	ZeroCopy bool
	// Why explains the choice of backend or mode (e.g. the error that
	// made zero-copy or native mode fall back).
	Why string
}

// Link is the engine's only way to the wire: batch-shaped, single-owner
// (only the engine goroutine calls it), non-blocking except Poll. The
// AF_XDP backend, the UDP-socket backend and the in-memory twin all
// implement it, so the engine cannot tell them apart.
type Link interface {
	// Receive fills batch with up to len(batch) packets and returns how
	// many. It does not block.
	Receive(batch []RxPacket) int
	// Release gives received packets' frames back to the link.
	Release(batch []RxPacket)
	// ReserveTx prepares up to len(batch) transmit buffers and returns how
	// many it could (fewer when the TX ring or frame pool is short).
	ReserveTx(batch []TxPacket) int
	// SubmitTx sends the reserved packets whose Len is nonzero and takes
	// back the buffers of those left at zero. One call is one batch: at
	// most one syscall, none where the backend can avoid it.
	SubmitTx(batch []TxPacket) error
	// Poll blocks until the link may have packets to receive or timeout
	// passes. The engine calls it only when idle.
	Poll(timeout time.Duration) error
	// Info describes the link.
	Info() LinkInfo
	// Close releases the link's resources.
	Close() error
}

// Neighbor resolves the next hop's MAC address for a destination; the
// AF_XDP backend needs it to build Ethernet headers (the UDP backend lets
// the kernel do it).
type Neighbor interface {
	Lookup(dst netip.Addr) ([6]byte, bool)
}
