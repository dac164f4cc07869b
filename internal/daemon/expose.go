package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/transport"
)

// The expose op makes this daemon a target for the compliance suite
// (compliance/, docs/compliance.md), which plays a peer packet by packet
// and needs to know what memory it may touch:
//
//	{"op":"expose"}   listen on ComplianceService with the regions below
//	                  (once; later calls only report), post receive buffers
//	                  on every connection established from then on, and
//	                  answer with the regions and the receive completions
//	                  seen so far.
//
// The suite is a peer on the wire, not an application on this host, so
// the daemon itself holds what it needs: a readable region (READ cases,
// and reading back what a WRITE or SEND placed), a read-only and a
// write-only region (access rights, §10.2), posted receive buffers (SEND,
// RNR) and the receive completions (immediate data, §4.3). The exposer is
// the Inner driver of each engine's control.EngineDriver, which hands it
// the completions of connections that are no queue pair's.

// ComplianceService is the service id the expose op listens on ("cmpl").
// ComplianceOtherService ("cmpm") has a region of its own, so the suite can
// check that a key of another protection domain is not found (§10.1).
const (
	ComplianceService      = 0x636d706c
	ComplianceOtherService = 0x636d706d
)

// Layout of the exposed memory. The receive buffers are a slice of the
// read-write region, so the suite can READ back what a SEND placed.
const (
	exposeRWLen     = 64 << 10
	exposeSmallLen  = 4 << 10
	exposeRecvOff   = 32 << 10 // receive buffers start here in "rw"
	exposeRecvCount = 16       // buffers posted per connection: RecvSeq 0..15
	exposeRecvSize  = 1024
	exposeMaxEvents = 512 // the answer stays one control message (proto.MaxMessage)
)

// Exposed is the expose op's answer.
type Exposed struct {
	Service uint32          `json:"service"`
	Regions []ExposedRegion `json:"regions"`
	Recv    ExposedRecv     `json:"recv"`
	Events  []ExposedEvent  `json:"events"`
}

// ExposedRegion is one registered region as the peer addresses it.
type ExposedRegion struct {
	// Service is set on regions of another protection domain than the
	// exposed service's (§10.1): a connection to Exposed.Service must
	// not reach them.
	Service uint32   `json:"service,omitempty"`
	Name    string   `json:"name"`
	Addr    uint64   `json:"addr"`
	RKey    uint32   `json:"rkey"`
	Len     int      `json:"len"`
	Access  []string `json:"access"` // "remote_read", "remote_write"
}

// ExposedRecv describes the receive buffers posted on each connection:
// buffer n (RecvSeq n, n < Count) is Size bytes at Addr + n*Size of the
// region named Region.
type ExposedRecv struct {
	Region string `json:"region"`
	Addr   uint64 `json:"addr"`
	Count  int    `json:"count"`
	Size   int    `json:"size"`
}

// ExposedEvent is one receive completion on an exposed connection.
type ExposedEvent struct {
	PeerConn uint32 `json:"peer_conn"` // the peer's connection id (the suite's own)
	Op       string `json:"op"`        // "recv" or "recv_write_imm"
	Status   string `json:"status"`
	Bytes    int    `json:"bytes"`
	Imm      uint32 `json:"imm"`
	HasImm   bool   `json:"has_imm"`
	WRID     uint64 `json:"wrid"`
}

// TestLinkFault, when set before Run, wraps every link Run opens. Only
// tests set it: the compliance suite's own tests switch on a deliberate
// fault (acks without SACK bits, no CRC check) in a daemon they run in
// process, to prove the suite catches it. No shipped code sets it, so the
// faults themselves exist only in _test.go files.
var TestLinkFault func(dataplane.Link) dataplane.Link

func faultLinks(ls []dataplane.Link) []dataplane.Link {
	if TestLinkFault == nil {
		return ls
	}
	for i, l := range ls {
		ls[i] = TestLinkFault(l)
	}
	return ls
}

// exposer owns the exposed memory. Engines call completion on their own
// goroutines and the control socket reads the events, hence the mutex:
// it is taken once per connection and per receive completion, never per
// packet.
type exposer struct {
	info   Exposed // without Events
	rw     []byte
	mem    *transport.MemoryTable
	other  *transport.MemoryTable // ComplianceOtherService's domain
	mu     sync.Mutex
	events []ExposedEvent
}

func newExposer() *exposer {
	x := &exposer{rw: make([]byte, exposeRWLen)}
	ro, wo := make([]byte, exposeSmallLen), make([]byte, exposeSmallLen)
	mem := transport.NewMemoryTable()
	// Keys SHOULD be unpredictable (§10.1); addresses are arbitrary but
	// distinct, so a range check against the wrong region shows.
	add := func(name string, addr uint64, buf []byte, acc transport.Access, rights ...string) {
		key := randKey()
		for _, r := range x.info.Regions {
			if r.RKey == key {
				key ^= 0x5a5a5a5a
			}
		}
		mem.Add(&transport.Region{Key: key, Addr: addr, Buf: buf, Access: acc})
		x.info.Regions = append(x.info.Regions, ExposedRegion{Name: name, Addr: addr, RKey: key, Len: len(buf), Access: rights})
	}
	add("rw", 0x7c0000000000, x.rw, transport.AccessLocalWrite|transport.AccessRemoteRead|transport.AccessRemoteWrite,
		"remote_read", "remote_write")
	add("ro", 0x7c0100000000, ro, transport.AccessLocalWrite|transport.AccessRemoteRead, "remote_read")
	add("wo", 0x7c0200000000, wo, transport.AccessLocalWrite|transport.AccessRemoteWrite, "remote_write")
	// A region in another domain, with every right, so that only the
	// domain can keep a connection to ComplianceService from it.
	x.other = transport.NewMemoryTable()
	key := randKey()
	x.other.Add(&transport.Region{Key: key, Addr: 0x7c0300000000, Buf: make([]byte, exposeSmallLen),
		Access: transport.AccessLocalWrite | transport.AccessRemoteRead | transport.AccessRemoteWrite})
	x.info.Regions = append(x.info.Regions, ExposedRegion{Service: ComplianceOtherService, Name: "other-domain",
		Addr: 0x7c0300000000, RKey: key, Len: exposeSmallLen, Access: []string{"remote_read", "remote_write"}})
	x.info.Service = ComplianceService
	x.info.Recv = ExposedRecv{Region: "rw", Addr: 0x7c0000000000 + exposeRecvOff, Count: exposeRecvCount, Size: exposeRecvSize}
	x.mem = mem
	return x
}

func randKey() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) | 1 // never 0
}

// Step has nothing to do: the suite drives every exchange from its side.
func (x *exposer) Step(*dataplane.Engine, transport.Time) bool { return false }

// Completion runs on an engine goroutine, for connections that are no
// application queue pair's. Every such connection established while
// exposed gets the receive buffers.
func (x *exposer) Completion(_ *dataplane.Engine, _ transport.Time, c transport.Completion) {
	switch c.Op {
	case transport.OpConnected:
		for n := 0; n < exposeRecvCount; n++ {
			off := exposeRecvOff + n*exposeRecvSize
			c.Conn.PostRecv(uint64(n), x.rw[off:off+exposeRecvSize])
		}
	case transport.OpRecv, transport.OpRecvWriteImm:
		x.mu.Lock()
		if len(x.events) == exposeMaxEvents {
			x.events = append(x.events[:0], x.events[exposeMaxEvents/2:]...)
		}
		x.events = append(x.events, ExposedEvent{PeerConn: c.Conn.PeerID(), Op: c.Op.String(), Status: c.Status.String(),
			Bytes: c.Bytes, Imm: c.Imm, HasImm: c.HasImm, WRID: c.WRID})
		x.mu.Unlock()
	}
}

func (x *exposer) report() *Exposed {
	r := x.info
	x.mu.Lock()
	r.Events = append([]ExposedEvent{}, x.events...)
	x.mu.Unlock()
	return &r
}

// exposers maps a *Daemon to its exposer, so that the op needs no field
// in Daemon (a process may run several daemons: the tests do).
var exposers sync.Map

// expose handles the expose op.
func (d *Daemon) expose(ctx context.Context, resp *Response) error {
	v, _ := exposers.LoadOrStore(d, newExposer())
	x := v.(*exposer)
	for _, en := range d.engines {
		if err := en.e.Do(ctx, func(transport.Time) {
			if en.ctl.Inner == nil {
				en.ctl.Inner = x
				en.ep.Listen(ComplianceService, x.mem)
				en.ep.Listen(ComplianceOtherService, x.other)
			}
		}); err != nil {
			return err
		}
	}
	resp.Expose = x.report()
	return nil
}
