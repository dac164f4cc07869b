package bpf

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// DefaultPort is the UDP destination port MetaRoCE uses when Options.Port is
// zero. It matches the initial value of metaroce_port in xdp_steer.c.
const DefaultPort = 4792

// DefaultQueues is the number of RX queues the socket map covers when
// Options.Queues is zero: enough for common NICs (mlx5 and ice expose up to a
// few hundred channels), and an XSKMAP slot costs one pointer.
const DefaultQueues = 256

// maxQueues bounds Options.Queues; rx_queue_index is a u32, but no NIC has
// anywhere near this many queues and the map is allocated up front.
const maxQueues = 1 << 16

// Options configures Load. The zero value is valid.
type Options struct {
	// Port is the UDP destination port that marks a MetaRoCE packet.
	// Zero means DefaultPort.
	Port uint16
	// Frags selects the multi-buffer variant (BPF_F_XDP_HAS_FRAGS), which
	// can attach in native mode to an interface whose MTU does not fit in
	// one page (above about 3500 bytes). Its sockets must be bound with
	// XDP_USE_SG.
	Frags bool
	// Queues is the number of RX queues the socket map has slots for.
	// Packets arriving on a higher queue are passed to the kernel and
	// counted as RedirectFailed. Zero means DefaultQueues.
	Queues uint32
}

// spec is Options validated, with the defaults filled in.
type spec struct {
	port   uint16
	frags  bool
	queues uint32
}

func (o Options) spec() (spec, error) {
	s := spec{port: o.Port, frags: o.Frags, queues: o.Queues}
	if s.port == 0 {
		s.port = DefaultPort
	}
	if s.queues == 0 {
		s.queues = DefaultQueues
	}
	if s.queues > maxQueues {
		return spec{}, fmt.Errorf("queues %d above the maximum %d", s.queues, maxQueues)
	}
	return s, nil
}

// Mode is an XDP attach mode.
type Mode int

const (
	// ModeAuto asks Attach for native mode and falls back to generic.
	ModeAuto Mode = iota
	// ModeNative runs the program in the driver, before an skb exists.
	ModeNative
	// ModeGeneric runs the program on the skb, for any driver; slower.
	ModeGeneric
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Attachment reports what Attach did.
type Attachment struct {
	// Ifindex is the interface the program is attached to.
	Ifindex int
	// Mode is ModeNative or ModeGeneric, never ModeAuto.
	Mode Mode
	// NativeErr is why native mode was refused when ModeAuto fell back to
	// generic mode, and nil otherwise. Worth logging: generic mode is much
	// slower.
	NativeErr error
}

// Counters are the program's packet counters summed over all CPUs. Each
// packet the program sees bumps exactly one of them.
type Counters struct {
	// Redirected counts MetaRoCE packets handed to the socket of their RX
	// queue. A socket that then cannot take the frame (RX ring or fill
	// ring empty, bound to another queue) drops it and counts it in its
	// own XDP_STATISTICS, not here.
	Redirected uint64
	// Passed counts packets that are not MetaRoCE and went to the kernel.
	Passed uint64
	// DroppedShort counts packets to the port whose UDP payload is under
	// 12 bytes or whose UDP length exceeds the frame.
	DroppedShort uint64
	// DroppedVersion counts packets to the port whose first payload byte,
	// the MetaRoCE version, is not 1.
	DroppedVersion uint64
	// DroppedFragment counts first fragments of IPv4 datagrams to the
	// port. Later fragments carry no port and are Passed.
	DroppedFragment uint64
	// RedirectFailed counts MetaRoCE packets whose RX queue had no socket
	// in the map; they were passed to the kernel.
	RedirectFailed uint64
}

// Program is the loaded XDP steering program with its socket map and
// counters. Its methods may be called concurrently.
type Program struct {
	prog     *ebpf.Program
	xsks     *ebpf.Map
	counters *ebpf.Map
	port     uint16
	frags    bool
	stamped  bool

	mu     sync.Mutex // guards the fields below
	link   link.Link  // nil until Attach succeeds; Close closes it
	closed bool
}

// Load loads the program variant selected by opts into the kernel, with the
// port compiled in as a constant. It needs CAP_BPF (and CAP_NET_ADMIN to
// attach). The program is not attached: see Attach.
func Load(opts Options) (*Program, error) {
	s, err := opts.spec()
	if err != nil {
		return nil, fmt.Errorf("load xdp steering program: %w", err)
	}
	name, plain := steerProgXdpSteer, steerProgXdpSteerNostamp
	if s.frags {
		name, plain = steerProgXdpSteerFrags, steerProgXdpSteerFragsNostamp
	}
	p, err := loadOne(s, name)
	if err != nil && strings.Contains(err.Error(), "bpf_xdp_adjust_meta") {
		// This kernel refuses the arrival stamp's helper to every XDP
		// program (its verifier: "program of this type cannot use
		// helper"): the same program without the stamp; the engines then
		// time packets as they take them from the ring.
		p, err = loadOne(s, plain)
		if p != nil {
			p.stamped = false
		}
	}
	return p, err
}

// loadOne loads program name of the collection alone, so no other variant is
// ever verified.
func loadOne(s spec, name string) (*Program, error) {
	cs, err := loadSteer()
	if err != nil {
		return nil, err
	}
	if err := cs.Variables[steerVarMetarocePort].Set(s.port); err != nil {
		return nil, fmt.Errorf("set port: %w", err)
	}
	cs.Maps[steerMapXsks].MaxEntries = s.queues
	for n := range cs.Programs {
		if n != name {
			delete(cs.Programs, n)
		}
	}
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		return nil, fmt.Errorf("load xdp program %s: %w", name, err)
	}
	// The program holds its own references to the maps it uses; closing
	// the collection releases only what Program does not keep (.rodata).
	defer coll.Close()
	return &Program{
		prog:     coll.DetachProgram(name),
		xsks:     coll.DetachMap(steerMapXsks),
		counters: coll.DetachMap(steerMapCounters),
		port:     s.port,
		frags:    s.frags,
		stamped:  true,
	}, nil
}

// Stamped reports whether the program writes each MetaRoCE packet's
// arrival time into its metadata (false on a kernel that refuses
// bpf_xdp_adjust_meta to XDP programs).
func (p *Program) Stamped() bool { return p.stamped }

// Port reports the UDP destination port the program matches.
func (p *Program) Port() uint16 { return p.port }

// Frags reports whether this is the multi-buffer variant.
func (p *Program) Frags() bool { return p.frags }

// SetSocket makes fd, an AF_XDP socket, the destination of MetaRoCE packets
// arriving on RX queue queue, replacing any previous socket for the queue.
// The socket must have its UMEM and RX ring set up. The map holds its own
// reference: closing fd does not remove the entry, DeleteSocket does.
func (p *Program) SetSocket(queue uint32, fd int) error {
	if fd < 0 {
		return fmt.Errorf("set socket for queue %d: bad fd %d", queue, fd)
	}
	if err := p.xsks.Update(queue, uint32(fd), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("set socket for queue %d: %w", queue, err)
	}
	return nil
}

// DeleteSocket removes the socket for queue; its MetaRoCE packets then go to
// the kernel and count as RedirectFailed. Deleting an empty slot is not an
// error.
func (p *Program) DeleteSocket(queue uint32) error {
	if err := p.xsks.Delete(queue); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete socket for queue %d: %w", queue, err)
	}
	return nil
}

// Attach attaches the program to the interface with index ifindex through a
// bpf_link, so the attachment ends when Close is called or the process exits,
// and an XDP program someone else attached is never replaced or removed (the
// kernel refuses the link with EBUSY instead). ifindex is resolved in the
// network namespace of the calling OS thread. ModeAuto tries native mode,
// then generic unless native failed because the interface is taken. A
// Program attaches to one interface at most.
func (p *Program) Attach(ifindex int, mode Mode) (Attachment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Attachment{}, errors.New("attach xdp: program closed")
	}
	if p.link != nil {
		return Attachment{}, errors.New("attach xdp: program already attached")
	}

	a := Attachment{Ifindex: ifindex, Mode: mode}
	var err error
	switch mode {
	case ModeNative, ModeGeneric:
		p.link, err = p.attach(ifindex, mode)
	case ModeAuto:
		a.Mode = ModeNative
		p.link, err = p.attach(ifindex, ModeNative)
		// EBUSY: the interface already has an XDP program, which a
		// generic attach would not get past either.
		if err != nil && !errors.Is(err, unix.EBUSY) {
			a.Mode, a.NativeErr = ModeGeneric, err
			p.link, err = p.attach(ifindex, ModeGeneric)
			if err != nil {
				err = errors.Join(a.NativeErr, err)
			}
		}
	default:
		err = fmt.Errorf("unknown mode %v", mode)
	}
	if err != nil {
		p.link = nil
		return Attachment{}, fmt.Errorf("attach xdp to ifindex %d: %w", ifindex, err)
	}
	return a, nil
}

func (p *Program) attach(ifindex int, mode Mode) (link.Link, error) {
	flags := link.XDPDriverMode
	if mode == ModeGeneric {
		flags = link.XDPGenericMode
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: flags})
	if err != nil {
		return nil, fmt.Errorf("%v mode: %w", mode, err)
	}
	return l, nil
}

// Counters reads the counters, summing the per-CPU values.
func (p *Program) Counters() (Counters, error) {
	var c Counters
	fields := [...]struct {
		key steerCounter
		dst *uint64
	}{
		{steerCounterCOUNTER_REDIRECTED, &c.Redirected},
		{steerCounterCOUNTER_PASSED, &c.Passed},
		{steerCounterCOUNTER_DROPPED_SHORT, &c.DroppedShort},
		{steerCounterCOUNTER_DROPPED_VERSION, &c.DroppedVersion},
		{steerCounterCOUNTER_DROPPED_FRAGMENT, &c.DroppedFragment},
		{steerCounterCOUNTER_REDIRECT_FAILED, &c.RedirectFailed},
	}
	// Compile-time check that every C counter has a field above.
	var _ [len(fields)]struct{} = [steerCounterCOUNTER_MAX]struct{}{}

	var perCPU []uint64
	for _, f := range fields {
		if err := p.counters.Lookup(f.key, &perCPU); err != nil {
			return Counters{}, fmt.Errorf("read counter %d: %w", f.key, err)
		}
		for _, v := range perCPU {
			*f.dst += v
		}
	}
	return c, nil
}

// Close detaches the program if Attach attached it, then releases the
// program and its maps. Only the bpf_link this Program created is closed.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.link != nil {
		if err := p.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach xdp: %w", err))
		}
		p.link = nil
	}
	for _, c := range []interface{ Close() error }{p.prog, p.xsks, p.counters} {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
