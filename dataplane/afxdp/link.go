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
// ports) and drops with a count by reason.
//
// Jumbo frames: at an MTU above what one UMEM frame holds (see plan) the
// socket is bound with XDP_USE_SG and the steering program is its
// BPF_F_XDP_HAS_FRAGS variant. A received packet then arrives as a chain of
// descriptors, which Receive gathers (xsk.Assembler) into one of a fixed set
// of per-link scratch buffers allocated at Open, one per batch slot and one
// for a chain that straddles two batches; the RX frames go back to the pool
// as soon as they are copied, and the scratch buffer comes back with
// Release. Single-buffer packets are still handed over in place. On
// transmit the link hands out TX spans (several consecutive UMEM frames)
// instead of single frames, so the transport writes even a 9000-byte packet
// in one piece at the usual offset; SubmitTx splits it at frame boundaries
// into a PktContd chain. The transmit buffer is never longer than the MTU
// allows, and MaxPayload says how long it is, so a transport configured for
// a larger MTU than the link's can be refused before it runs.
package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
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
	// MTU is the IP MTU of the link: the longest packet it sends and
	// expects to receive. 0 means 1500. It sizes the transmit buffers and
	// decides single- or multi-buffer frames (plan).
	MTU int
	XSK xsk.Config
	// TxBudget bounds the packets the link holds between SubmitTx and
	// their completion (in the TX ring and the kernel's or NIC's transmit
	// path): ReserveTx hands out no more buffers than the budget has
	// left, refilled from the completion ring. A packet's Timestamp
	// (§4.2) is read when the transport writes it, so every packet queued
	// inside the host behind it is host delay in its RTT sample that the
	// congestion controller cannot tell from the fabric's; unbounded, a
	// flush filled the 2048-slot TX ring and 512 packets that carried one
	// Timestamp reached the switch over 8 ms (metaroce decode). The
	// transport keeps what does not fit, unstamped, until room comes
	// back. Default 32 packets: 48 KB at MTU 1500, 40 us at the 10 Gb/s
	// the raw AF_XDP baseline reaches on veth, and enough that one kick
	// still moves a full batch (copy mode's sendto sends up to
	// TxSkbBudget frames).
	TxBudget int
	// XDPMode is reported in Info ("native" or "generic"); the caller
	// attaches the program.
	XDPMode string
}

// Stats are drops and events, written only by the engine goroutine.
type Stats struct {
	RxFrames, TxFrames uint64
	RxBadFrame         [frame.NumReasons]uint64 // by frame.Reason
	RxNotForUs         uint64                   // wrong address, family or port
	RxChained          uint64                   // multi-buffer packets gathered from a descriptor chain
	RxMultiBuffer      uint64                   // multi-buffer packets dropped: over the MTU, over 18 buffers, or no scratch free
	TxNoNeighbor       uint64                   // next hop MAC unknown yet
	TxFamily           uint64                   // destination of the other address family
	TxRingFull         uint64
	TxBudgetFull       uint64 // ReserveTx calls that found the TX budget spent
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

	maxPayload int  // UDP payload bytes a transmit buffer holds (the MTU's, for our family)
	spanned    bool // transmit from TX spans (multi-buffer) rather than single frames
	txReserve  int  // pool frames Receive leaves for ReserveTx
	txBudget   int  // TX descriptors the link may hold uncompleted (Config.TxBudget, in descriptors)
	descPerPkt int  // TX descriptors a packet takes at most
	asm        xsk.Assembler
	chain      int // scratch slot of the chain being gathered, -1 if none
	// chainArrival is the arrival stamp of the chain being gathered,
	// read from its first descriptor's chunk (the only one with
	// metadata before it).
	chainArrival int64
	scratch      scratch
}

// Open opens the socket. It must run in the interface's network namespace.
func Open(cfg Config, neigh dataplane.Neighbor) (*Link, error) {
	if !cfg.Local.IsValid() {
		return nil, errors.New("afxdp: no local address")
	}
	xc, p, err := plan(cfg.MTU, cfg.Local.Is6(), cfg.XSK)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %s queue %d: %w", cfg.Ifname, cfg.Queue, err)
	}
	s, err := xsk.Open(cfg.Ifindex, cfg.Queue, xc)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %s queue %d: %w", cfg.Ifname, cfg.Queue, err)
	}
	const batch = 256
	l := &Link{cfg: cfg, sock: s, neigh: neigh, is6: cfg.Local.Is6(),
		rx: make([]xsk.Desc, batch), tx: make([]xsk.Desc, batch*max(1, int(xc.SpanFrames))),
		maxPayload: p.maxPayload, spanned: xc.TxSpans > 0, chain: -1}
	if xc.SG {
		// One buffer per batch slot, and one for a chain still open when
		// the batch is handed over.
		l.scratch.init(batch+1, p.rxFrame)
	}
	if !l.spanned {
		l.txReserve = s.Pool().Cap() / 4
	}
	if cfg.TxBudget <= 0 {
		cfg.TxBudget = DefaultTxBudget
		l.cfg.TxBudget = cfg.TxBudget
	}
	l.descPerPkt = 1
	if l.spanned {
		l.descPerPkt = max(1, int(xc.SpanFrames))
	}
	l.txBudget = cfg.TxBudget * l.descPerPkt
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
	if xc.SG {
		l.info.Why = strings.TrimPrefix(l.info.Why+fmt.Sprintf("; multi-buffer frames (MTU %d)", p.mtu), "; ")
	}
	s.Refill(s.Pool().Free() - l.txReserve)
	return l, nil
}

// MaxPayload is the longest UDP payload the link sends: the length of the
// buffers ReserveTx hands out.
func (l *Link) MaxPayload() int { return l.maxPayload }

// FD returns the socket's descriptor, for the XSKMAP.
func (l *Link) FD() int { return l.sock.FD() }

// Socket returns the underlying socket (for statistics).
func (l *Link) Socket() *xsk.Socket { return l.sock }

func (l *Link) Info() dataplane.LinkInfo { return l.info }

func (l *Link) Receive(batch []dataplane.RxPacket) int {
	// Keep the fill ring stocked, but leave the pool enough for TX.
	pool := l.sock.Pool()
	if free := pool.Free(); free > l.txReserve {
		l.sock.Refill(free - l.txReserve)
	}
	want := min(len(batch), len(l.rx))
	n := l.sock.Receive(l.rx[:want])
	k := 0
	for _, d := range l.rx[:n] {
		var buf []byte
		handle := d.Addr
		var arrival int64
		if l.asm.Idle() && !d.More() {
			buf = l.sock.Frame(d.Addr, d.Len) // in place, no copy
			arrival = l.takeArrival(d.Addr)
		} else {
			if l.asm.Idle() {
				var sb []byte
				l.chain, sb = l.scratch.get() // nil when none is free: dropped
				l.asm.Start(sb)
				l.chainArrival = l.takeArrival(d.Addr)
			}
			pkt, st := l.asm.Add(l.sock.Frame(d.Addr, d.Len), d.More())
			pool.Put(d.Addr)
			if st == xsk.AsmMore {
				continue
			}
			slot := l.chain
			l.chain = -1
			if st == xsk.AsmDropped {
				l.Stats.RxMultiBuffer++
				l.scratch.put(slot)
				continue
			}
			l.Stats.RxChained++
			buf, handle, arrival = pkt, scratchHandle|uint64(slot), l.chainArrival
		}
		if err := l.parser.Parse(buf, &l.f); err != nil {
			if r, ok := err.(frame.Reason); ok && int(r) < len(l.Stats.RxBadFrame) {
				l.Stats.RxBadFrame[r]++
			}
			l.putRx(handle)
			continue
		}
		if l.f.Is6 != l.is6 || l.f.Dst != l.cfg.Local || l.f.DstPort != l.cfg.Port {
			l.Stats.RxNotForUs++
			l.putRx(handle)
			continue
		}
		batch[k] = dataplane.RxPacket{Payload: l.f.Payload, From: l.f.Src, CE: l.f.ECN == 3,
			SrcPort: l.f.SrcPort, Handle: handle, Arrival: arrival}
		k++
	}
	l.Stats.RxFrames += uint64(k)
	l.held += k
	return k
}

// metaLen is the XDP metadata the steering program writes before each
// packet (bpf/xdp_steer.c): its arrival time, bpf_ktime_get_ns, in host
// byte order.
const metaLen = 8

// takeArrival reads the arrival stamp in the metadata before the packet at
// addr and zeroes it, so a frame the program could not stamp next time
// (a driver that refuses bpf_xdp_adjust_meta) reads 0, unknown, rather than
// an earlier packet's time; 0 also when the frame has no room before the
// packet. A multi-buffer packet's metadata is before its first buffer
// only (Receive reads it there).
func (l *Link) takeArrival(addr uint64) int64 {
	if addr-l.sock.Pool().FrameStart(addr) < metaLen {
		return 0
	}
	m := l.sock.UMEM()[addr-metaLen : addr]
	t := int64(binary.NativeEndian.Uint64(m))
	binary.NativeEndian.PutUint64(m, 0)
	return t
}

// putRx gives back a received packet's frame or scratch buffer.
func (l *Link) putRx(handle uint64) {
	if handle&scratchHandle != 0 {
		l.scratch.put(int(handle &^ scratchHandle))
		return
	}
	l.sock.Pool().Put(handle)
}

func (l *Link) Release(batch []dataplane.RxPacket) {
	for i := range batch {
		l.putRx(batch[i].Handle)
		batch[i].Payload = nil
	}
	l.held -= len(batch)
}

// DefaultTxBudget is Config.TxBudget's default (its reason is there).
const DefaultTxBudget = 32

// TxHeld is how many TX descriptors the kernel holds: submitted and not
// yet completed (at most the budget).
func (l *Link) TxHeld() int {
	_, tx := l.sock.InFlight()
	return int(tx)
}

// headroom is where the transport packet starts in every TX chunk.
const headroom = frame.MaxHeaderLen

func (l *Link) ReserveTx(batch []dataplane.TxPacket) int {
	l.sock.Complete()
	n := min(len(batch), len(l.rx))
	_, held := l.sock.InFlight()
	if room := (l.txBudget - int(held)) / l.descPerPkt; room < n {
		n = max(room, 0)
	}
	if n == 0 {
		l.Stats.TxBudgetFull++
		// Descriptors a busy kick left in the ring need another kick to
		// leave; without one the budget never refills.
		l.sock.KickTX()
		return 0
	}
	if l.spanned {
		for i := 0; i < n; i++ {
			addr, ok := l.sock.GetSpan()
			if !ok {
				return i
			}
			buf := l.sock.SpanBuf(addr)
			batch[i] = dataplane.TxPacket{Buf: buf[headroom : headroom+l.maxPayload], Handle: addr}
		}
		return n
	}
	pool := l.sock.Pool()
	n = min(n, pool.Free())
	for i := 0; i < n; i++ {
		addr, _ := pool.Get()
		buf := l.sock.FrameBuf(addr)
		batch[i] = dataplane.TxPacket{Buf: buf[headroom : headroom+l.maxPayload], Handle: addr}
	}
	return n
}

// putTx gives back a transmit buffer that was not sent.
func (l *Link) putTx(handle uint64) {
	if l.spanned {
		l.sock.PutSpan(handle)
		return
	}
	l.sock.Pool().Put(handle)
}

func (l *Link) SubmitTx(batch []dataplane.TxPacket) error {
	hl := frame.HeaderLen(l.is6)
	pool := l.sock.Pool()
	m := 0
	for i := range batch {
		p := &batch[i]
		if p.Len == 0 {
			l.putTx(p.Handle)
			continue
		}
		if p.Dst.Is6() != l.is6 {
			l.Stats.TxFamily++
			l.putTx(p.Handle)
			continue
		}
		mac, ok := l.neigh.Lookup(p.Dst)
		if !ok {
			l.Stats.TxNoNeighbor++
			l.putTx(p.Handle)
			continue
		}
		start := p.Handle + headroom - uint64(hl)
		var fb []byte
		if l.spanned {
			fb = l.sock.SpanBuf(start)
		} else {
			fb = l.sock.FrameBuf(start)
		}
		l.ep.DstMAC, l.ep.Dst, l.ep.SrcPort = mac, p.Dst, p.SrcPort
		dscp := l.cfg.DSCPData
		if p.Control {
			dscp = l.cfg.DSCPControl
		}
		if _, err := frame.Build(fb, &l.ep, dscp, 2 /* ECT(0) */, p.Len); err != nil {
			l.putTx(p.Handle)
			continue
		}
		if l.is6 {
			frame.Finish(fb)
		} else {
			frame.FinishV4NoUDPChecksum(fb) // the CRC32C protects the packet (§2.1)
		}
		if l.spanned {
			// One descriptor per frame the packet touches, chained.
			m += pool.Split(start, uint32(hl+p.Len), l.tx[m:])
		} else {
			l.tx[m] = xsk.Desc{Addr: start, Len: uint32(hl + p.Len)}
			m++
		}
	}
	if m == 0 {
		return nil
	}
	q, err := l.sock.Transmit(l.tx[:m])
	for i, d := range l.tx[q:m] {
		// Transmit queues whole chains, so l.tx[q] starts a packet; give
		// back each packet's buffer once, at its first descriptor.
		if i == 0 || !l.tx[q+i-1].More() {
			l.Stats.TxRingFull++
			l.putTx(d.Addr)
		}
	}
	if l.spanned {
		for _, d := range l.tx[:q] {
			if !d.More() {
				l.Stats.TxFrames++
			}
		}
	} else {
		l.Stats.TxFrames += uint64(q)
	}
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
