// Package afxdp is the AF_XDP backend of dataplane.Link: one AF_XDP socket
// (dataplane/xsk) on one NIC queue, fed by the steering program of bpf/,
// with frames built and parsed by wire/frame and next hops resolved from
// the kernel's neighbour table.
//
// Frame layout: every transmit frame reserves frame.MaxHeaderLen (62)
// bytes in front of the transport packet, so the transport writes its
// packet at one fixed offset whatever the address family; the frame then
// starts 20 bytes later for IPv4 (42-byte headers) and at the chunk start
// for IPv6. Headers and checksums are written in SubmitTx, after the
// packet, in one pass over the batch.
//
// Frame ownership: frames live in the socket's pool; Refill lends them to
// the kernel through the fill ring, Receive hands RX frames to the engine
// until Release, ReserveTx takes frames for transmission, and Complete
// returns sent frames to the pool. Nothing is allocated per packet.
//
// Receive checks what the XDP program did not (addresses, checksums,
// ports) and drops with a count by reason; multi-buffer frames (jumbo
// frames in several descriptors) are not reassembled yet and are dropped
// and counted, so MTUs above what one 4096-byte frame holds need the UDP
// backend for now.
package afxdp

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/wire/frame"
)

// Config describes one AF_XDP link.
type Config struct {
	Ifindex  int
	Ifname   string
	Queue    uint32
	Local    netip.Addr // our address on the interface (one family per link)
	LocalMAC [6]byte
	Port     uint16 // MetaRoCE UDP port
	// DSCP for data and control packets (§2.4).
	DSCPData, DSCPControl uint8
	XSK                   xsk.Config
	// XDPMode is reported in Info ("native" or "generic"); the caller
	// attaches the program.
	XDPMode string
}

// Stats are drops and events, written only by the engine goroutine.
type Stats struct {
	RxFrames, TxFrames uint64
	RxBadFrame         [frame.NumReasons]uint64 // by frame.Reason
	RxNotForUs         uint64                   // wrong address, family or port
	RxMultiBuffer      uint64                   // chained descriptors: not reassembled
	TxNoNeighbor       uint64                   // next hop MAC unknown yet
	TxFamily           uint64                   // destination of the other address family
	TxRingFull         uint64
}

// Link is an AF_XDP dataplane.Link.
type Link struct {
	cfg    Config
	sock   *xsk.Socket
	neigh  dataplane.Neighbor
	parser frame.Parser
	is6    bool
	rx     []xsk.Desc
	tx     []xsk.Desc
	ep     frame.Endpoints
	f      frame.Frame
	held   int // RX frames the engine holds
	Stats  Stats
	info   dataplane.LinkInfo
}

// Open opens the socket. It must run in the interface's network namespace.
func Open(cfg Config, neigh dataplane.Neighbor) (*Link, error) {
	if !cfg.Local.IsValid() {
		return nil, errors.New("afxdp: no local address")
	}
	s, err := xsk.Open(cfg.Ifindex, cfg.Queue, cfg.XSK)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %s queue %d: %w", cfg.Ifname, cfg.Queue, err)
	}
	l := &Link{cfg: cfg, sock: s, neigh: neigh, is6: cfg.Local.Is6(),
		rx: make([]xsk.Desc, 256), tx: make([]xsk.Desc, 256)}
	// Our own frames always carry full checksums, but frames the peer's
	// kernel sends may not (CHECKSUM_PARTIAL on veth); the CRC32C covers
	// the transport anyway, so only the IP header checksum is needed.
	l.parser.SkipUDPChecksum = true
	l.ep = frame.Endpoints{SrcMAC: cfg.LocalMAC, Src: cfg.Local, SrcPort: 0, DstPort: cfg.Port}
	inf := s.Info()
	l.info = dataplane.LinkInfo{Backend: "afxdp", Iface: cfg.Ifname, Queue: int(cfg.Queue),
		XDPMode: cfg.XDPMode, ZeroCopy: inf.ZeroCopy}
	if !inf.ZeroCopy && inf.ZeroCopyErr != nil {
		l.info.Why = "copy mode: zero-copy bind failed: " + inf.ZeroCopyErr.Error()
	}
	s.Refill(s.Pool().Free() / 2)
	return l, nil
}

// FD returns the socket's descriptor, for the XSKMAP.
func (l *Link) FD() int { return l.sock.FD() }

// Socket returns the underlying socket (for statistics).
func (l *Link) Socket() *xsk.Socket { return l.sock }

func (l *Link) Info() dataplane.LinkInfo { return l.info }

func (l *Link) Receive(batch []dataplane.RxPacket) int {
	// Keep the fill ring stocked, but leave the pool enough for TX.
	if free := l.sock.Pool().Free(); free > l.sock.Pool().Cap()/4 {
		l.sock.Refill(free - l.sock.Pool().Cap()/4)
	}
	want := min(len(batch), len(l.rx))
	n := l.sock.Receive(l.rx[:want])
	k := 0
	pool := l.sock.Pool()
	for _, d := range l.rx[:n] {
		if d.More() {
			l.Stats.RxMultiBuffer++
			pool.Put(d.Addr)
			continue
		}
		buf := l.sock.Frame(d.Addr, d.Len)
		if err := l.parser.Parse(buf, &l.f); err != nil {
			if r, ok := err.(frame.Reason); ok && int(r) < len(l.Stats.RxBadFrame) {
				l.Stats.RxBadFrame[r]++
			}
			pool.Put(d.Addr)
			continue
		}
		if l.f.Is6 != l.is6 || l.f.Dst != l.cfg.Local || l.f.DstPort != l.cfg.Port {
			l.Stats.RxNotForUs++
			pool.Put(d.Addr)
			continue
		}
		batch[k] = dataplane.RxPacket{Payload: l.f.Payload, From: l.f.Src, CE: l.f.ECN == 3,
			SrcPort: l.f.SrcPort, Handle: d.Addr}
		k++
	}
	l.Stats.RxFrames += uint64(k)
	l.held += k
	return k
}

func (l *Link) Release(batch []dataplane.RxPacket) {
	pool := l.sock.Pool()
	for i := range batch {
		pool.Put(batch[i].Handle)
		batch[i].Payload = nil
	}
	l.held -= len(batch)
}

// headroom is where the transport packet starts in every TX chunk.
const headroom = frame.MaxHeaderLen

func (l *Link) ReserveTx(batch []dataplane.TxPacket) int {
	l.sock.Complete()
	pool := l.sock.Pool()
	n := min(len(batch), len(l.tx), pool.Free())
	for i := 0; i < n; i++ {
		addr, _ := pool.Get()
		buf := l.sock.FrameBuf(addr)
		batch[i] = dataplane.TxPacket{Buf: buf[headroom:], Handle: addr}
	}
	return n
}

func (l *Link) SubmitTx(batch []dataplane.TxPacket) error {
	pool := l.sock.Pool()
	hl := frame.HeaderLen(l.is6)
	m := 0
	for i := range batch {
		p := &batch[i]
		if p.Len == 0 {
			pool.Put(p.Handle)
			continue
		}
		if p.Dst.Is6() != l.is6 {
			l.Stats.TxFamily++
			pool.Put(p.Handle)
			continue
		}
		mac, ok := l.neigh.Lookup(p.Dst)
		if !ok {
			l.Stats.TxNoNeighbor++
			pool.Put(p.Handle)
			continue
		}
		start := p.Handle + headroom - uint64(hl)
		fb := l.sock.FrameBuf(start)
		l.ep.DstMAC, l.ep.Dst, l.ep.SrcPort = mac, p.Dst, p.SrcPort
		dscp := l.cfg.DSCPData
		if p.Control {
			dscp = l.cfg.DSCPControl
		}
		if _, err := frame.Build(fb, &l.ep, dscp, 2 /* ECT(0) */, p.Len); err != nil {
			pool.Put(p.Handle)
			continue
		}
		if l.is6 {
			frame.Finish(fb)
		} else {
			frame.FinishV4NoUDPChecksum(fb) // the CRC32C protects the packet (§2.1)
		}
		l.tx[m] = xsk.Desc{Addr: start, Len: uint32(hl + p.Len)}
		m++
	}
	if m == 0 {
		return nil
	}
	q, err := l.sock.Transmit(l.tx[:m])
	for _, d := range l.tx[q:m] {
		l.Stats.TxRingFull++
		pool.Put(d.Addr)
	}
	l.Stats.TxFrames += uint64(q)
	return err
}

// PollFD is the socket, for an engine that sleeps on it beside other
// descriptors (dataplane.PollFDer).
func (l *Link) PollFD() (int, bool) { return l.sock.FD(), false }

func (l *Link) Poll(timeout time.Duration) error {
	_, err := l.sock.Wait(timeout, false)
	return err
}

func (l *Link) Close() error { return l.sock.Close() }
