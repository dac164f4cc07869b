package dataplane

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// PlaneLink serves the planes of one endpoint as one Link (docs/spec.md
// §7.9): Links[p] is the engine's link on plane p (an AF_XDP socket on
// that plane's interface and queue, or its UDP socket), each with its own
// addresses and neighbours. The engine and its transport endpoint stay
// single: a connection's packets on any plane reach the engine that owns
// it, since every plane's queue q belongs to engine q and the engines hand
// each other what they do not own (ConnectEngines), whatever the plane.
//
// Receive takes from every plane in turn, starting from a different one
// each batch so no plane's queue starves the others; Release gives each
// frame back to the plane it came from (the batch is split in the order
// Receive filled it).
//
// Transmit buffers come from one plane per batch, in turn (the transport
// picks a packet's plane only as it writes it). SubmitTx sends the packets
// written for that plane in place and copies the others into frames of
// their own plane's link: with P planes and packets spread evenly,
// (P-1)/P of them are copied once (a memcpy of the frame, no allocation:
// the per-plane batches are allocated here once). A plane whose link has
// no room for its copies drops them, counted in CopyDrops: a loss the
// transport recovers, as on a full NIC ring.
type PlaneLink struct {
	Links []Link

	rxSeg  []int // packets of the last Receive batch per plane, in fill order
	rxFrom []int // plane of each segment
	rxNext int   // the plane the next Receive starts with
	txHome int   // the plane of the buffers the last ReserveTx handed out
	moved  [][]TxPacket

	epfd   int // epoll set of the planes' descriptors, -1 if some link has none
	pfds   []unix.PollFd
	events [1]unix.EpollEvent

	// CopyDrops counts packets for another plane than their buffers'
	// that the other plane's link had no room for (only the engine writes
	// it; read it from the engine goroutine or after it stopped).
	CopyDrops, Copied uint64
}

// NewPlaneLink returns the link of one engine over its planes' links
// (links[p] on plane p). It owns them from now on.
func NewPlaneLink(links []Link, batch int) (*PlaneLink, error) {
	if len(links) < 1 || len(links) > 256 {
		return nil, errors.New("plane link: need 1..256 planes")
	}
	l := &PlaneLink{Links: links, rxSeg: make([]int, 0, len(links)), rxFrom: make([]int, 0, len(links)),
		moved: make([][]TxPacket, len(links)), epfd: -1}
	for i := range l.moved {
		l.moved[i] = make([]TxPacket, 0, batch)
	}
	fds := make([]int, 0, len(links))
	for _, k := range links {
		p, ok := k.(PollFDer)
		if !ok {
			return l, nil // no descriptor to sleep on: Poll takes turns
		}
		fd, _ := p.PollFD()
		fds = append(fds, fd)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("plane link: epoll: %w", err)
	}
	for _, fd := range fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(ep)
			return nil, fmt.Errorf("plane link: epoll add: %w", err)
		}
		l.pfds = append(l.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	l.epfd = ep
	return l, nil
}

func (l *PlaneLink) Receive(batch []RxPacket) int {
	l.rxSeg, l.rxFrom = l.rxSeg[:0], l.rxFrom[:0]
	n := 0
	P := len(l.Links)
	for i := 0; i < P && n < len(batch); i++ {
		p := (l.rxNext + i) % P
		k := l.Links[p].Receive(batch[n:])
		for j := range batch[n : n+k] {
			batch[n+j].Plane = uint8(p)
		}
		if k > 0 {
			l.rxSeg, l.rxFrom = append(l.rxSeg, k), append(l.rxFrom, p)
			n += k
		}
	}
	l.rxNext = (l.rxNext + 1) % P
	return n
}

func (l *PlaneLink) Release(batch []RxPacket) {
	off := 0
	for i, k := range l.rxSeg {
		if off+k > len(batch) {
			k = len(batch) - off
		}
		l.Links[l.rxFrom[i]].Release(batch[off : off+k])
		off += k
	}
	l.rxSeg, l.rxFrom = l.rxSeg[:0], l.rxFrom[:0]
}

func (l *PlaneLink) ReserveTx(batch []TxPacket) int {
	P := len(l.Links)
	for i := range P {
		p := (l.txHome + 1 + i) % P
		if k := l.Links[p].ReserveTx(batch); k > 0 {
			l.txHome = p
			for j := range batch[:k] {
				batch[j].Plane = uint8(p)
			}
			return k
		}
	}
	return 0
}

func (l *PlaneLink) SubmitTx(batch []TxPacket) error {
	home := l.txHome
	for i := range batch {
		t := &batch[i]
		p := int(t.Plane)
		if t.Len == 0 || p == home {
			continue
		}
		if p >= len(l.Links) {
			t.Len = 0 // a plane this host does not have: the transport never asks for one
			l.CopyDrops++
			continue
		}
		l.moved[p] = append(l.moved[p], TxPacket{})
	}
	var firstErr error
	for p, m := range l.moved {
		if len(m) == 0 {
			continue
		}
		k := l.Links[p].ReserveTx(m)
		j := 0
		for i := range batch {
			t := &batch[i]
			if t.Len == 0 || int(t.Plane) != p {
				continue
			}
			if j < k && len(m[j].Buf) >= t.Len {
				d := &m[j]
				d.Len = copy(d.Buf, t.Buf[:t.Len])
				d.Dst, d.SrcPort, d.Control, d.Plane = t.Dst, t.SrcPort, t.Control, t.Plane
				j++
				l.Copied++
			} else {
				l.CopyDrops++
			}
			t.Len = 0 // its home buffer goes back
		}
		for ; j < k; j++ {
			m[j].Len = 0
		}
		if err := l.Links[p].SubmitTx(m[:k]); err != nil && firstErr == nil {
			firstErr = err
		}
		l.moved[p] = m[:0]
	}
	if err := l.Links[home].SubmitTx(batch); err != nil && firstErr == nil {
		firstErr = err
	}
	return firstErr
}

// PollFD is the epoll set of the planes' descriptors (dataplane.PollFDer),
// ready when any plane's link holds packets already.
func (l *PlaneLink) PollFD() (int, bool) {
	ready := false
	for _, k := range l.Links {
		if p, ok := k.(PollFDer); ok {
			if _, r := p.PollFD(); r {
				ready = true
			}
		}
	}
	return l.epfd, ready
}

// Poll blocks until some plane may have packets or timeout passes.
func (l *PlaneLink) Poll(timeout time.Duration) error {
	if l.epfd < 0 {
		// Links without descriptors (the in-memory twin): take turns.
		for _, k := range l.Links {
			if err := k.Poll(timeout / time.Duration(len(l.Links))); err != nil {
				return err
			}
		}
		return nil
	}
	if _, r := l.PollFD(); r || timeout == 0 {
		return nil
	}
	for i := range l.pfds {
		l.pfds[i].Revents = 0
	}
	ts := unix.NsecToTimespec(int64(max(timeout, 0)))
	var tsp *unix.Timespec
	if timeout >= 0 {
		tsp = &ts
	}
	if _, err := unix.Ppoll(l.pfds, tsp, nil); err != nil && err != unix.EINTR {
		return fmt.Errorf("plane link: poll: %w", err)
	}
	return nil
}

// Info describes plane 0's link, naming every plane's interface.
func (l *PlaneLink) Info() LinkInfo {
	inf := l.Links[0].Info()
	names := make([]string, len(l.Links))
	for i, k := range l.Links {
		names[i] = k.Info().Iface
	}
	inf.Iface = strings.Join(names, "+")
	return inf
}

// ClosePoll releases only the plane link's own descriptor (the epoll
// set), for a daemon whose planes' links are closed by their owner (the
// AF_XDP interfaces close their sockets).
func (l *PlaneLink) ClosePoll() {
	if l.epfd >= 0 {
		unix.Close(l.epfd)
		l.epfd = -1
	}
}

// Close closes every plane's link.
func (l *PlaneLink) Close() error {
	var first error
	for _, k := range l.Links {
		if err := k.Close(); err != nil && first == nil {
			first = err
		}
	}
	if l.epfd >= 0 {
		unix.Close(l.epfd)
		l.epfd = -1
	}
	return first
}
