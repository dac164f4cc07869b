package testnet

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/internal/ecnmark"
)

// A switch port that behaves like a datacenter switch's: a tc tbf qdisc
// holds and paces what leaves the port at its rate, and an ecnmark program
// at the port's tc egress keeps a virtual queue at the same rate, marks CE
// on ECN-capable packets that find it above a threshold and drops those
// that would overflow the buffer (see internal/ecnmark's doc for why the
// two sit side by side). tbf's own limit is the buffer plus its bucket:
// it drops only what the marker admitted but tbf, draining late, has no
// room for (QdiscStats.Drops).

// ECNPortConfig shapes an ECN-marking port.
type ECNPortConfig struct {
	// RateBps is the port's rate in bits per second.
	RateBps uint64
	// ECNBytes is the marking threshold and LimitBytes the buffer (see
	// ecnmark.Config).
	ECNBytes, LimitBytes int
	// Burst is tbf's bucket in bytes; 0 picks 50 us at the rate, at least
	// two MTUs: a switch port sends back to back, it has no credit to
	// burst with, and the bucket should not hide a queue the marker sees.
	Burst int
}

// ECNPort is an ECN-marking port of a switch. It is removed with the
// switch's namespace, or by Close.
type ECNPort struct {
	// Port is the switch's end of the link, towards the host.
	Port *Endpoint
	cfg  ECNPortConfig
	prog *ecnmark.Program
	nl   *netlink.Handle
	link netlink.Link

	mu       sync.Mutex
	sampling chan struct{} // closed to stop the sampler
	done     chan struct{} // closed when the sampler has stopped
	samples  []int
}

// SetECNPort makes port i (towards host i of a star) an ECN-marking port:
// tbf at cfg.RateBps (replacing any rate SetRate set) and the marker.
func (s *Switch) SetECNPort(i int, cfg ECNPortConfig) (*ECNPort, error) {
	e, err := s.port(i)
	if err != nil {
		return nil, err
	}
	return e.SetECNPort(cfg)
}

// SetECNPort makes this interface an ECN-marking port (see ECNPortConfig).
func (e *Endpoint) SetECNPort(cfg ECNPortConfig) (_ *ECNPort, err error) {
	mc := ecnmark.Config{RateBps: cfg.RateBps, ECNBytes: cfg.ECNBytes, LimitBytes: cfg.LimitBytes}
	if err := mc.Validate(); err != nil {
		return nil, err
	}
	if cfg.Burst == 0 {
		cfg.Burst = max(int(cfg.RateBps/8/20000), 2*e.Link.Config.MTU)
	}
	// tbf's limit is the buffer plus its bucket. The marker drops first,
	// from its virtual queue; tbf drops only when its real backlog
	// outgrows the virtual one, which happens when tbf drains slower than
	// its rate (its watchdog timer fires late on a loaded machine): then
	// the port still holds no more than its buffer, as a switch's does.
	limit := cfg.LimitBytes + cfg.Burst
	if _, err := run("tc", "-n", e.NS.Name, "qdisc", "replace", "dev", e.Name, "root", "tbf",
		"rate", strconv.FormatUint(cfg.RateBps, 10)+"bit", "burst", strconv.Itoa(cfg.Burst),
		"limit", strconv.Itoa(limit)); err != nil {
		return nil, err
	}
	p := &ECNPort{Port: e, cfg: cfg}
	defer func() {
		if err != nil { // p, not the result: that is nil on every error return
			err = errors.Join(err, p.Close())
		}
	}()
	if p.prog, err = ecnmark.Load(mc); err != nil {
		return nil, err
	}
	if err := e.NS.Do(func() error {
		idx, err := ifindexHere(e.Name)
		if err != nil {
			return err
		}
		return p.prog.AttachEgress(idx)
	}); err != nil {
		return nil, fmt.Errorf("testnet: ECN port %s: %w", e, err)
	}
	// The backlog is read over netlink rather than with tc -s: it is
	// sampled every millisecond or so, and a process per sample would
	// cost more CPU than the traffic it watches.
	// The handle's socket is opened on a thread inside the namespace, so
	// it talks to that namespace's kernel tables from any goroutine.
	if err := e.NS.Do(func() error {
		var err error
		if p.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		p.link, err = p.nl.LinkByName(e.Name)
		return err
	}); err != nil {
		return nil, fmt.Errorf("testnet: netlink for %s: %w", e, err)
	}
	return p, nil
}

// Config returns the port's configuration (Burst filled in).
func (p *ECNPort) Config() ECNPortConfig { return p.cfg }

// Counters reads the marker's counters.
func (p *ECNPort) Counters() (ecnmark.Counters, error) { return p.prog.Counters() }

// Histogram reads the marker's histogram of the backlog arriving packets
// found.
func (p *ECNPort) Histogram() (ecnmark.Histogram, error) { return p.prog.Histogram() }

// Reset zeroes the marker's counters, histogram and virtual queue; call it
// while the port is idle.
func (p *ECNPort) Reset() error { return p.prog.Reset() }

// QdiscStats is what the port's tbf qdisc reports.
type QdiscStats struct {
	BacklogBytes, BacklogPackets uint32
	Drops, Overlimits            uint32
}

// Qdisc reads the tbf qdisc's backlog and drops over netlink (tc -s qdisc
// show, without the process).
func (p *ECNPort) Qdisc() (QdiscStats, error) {
	qs, err := p.nl.QdiscList(p.link)
	if err != nil {
		return QdiscStats{}, fmt.Errorf("testnet: list qdiscs of %s: %w", p.Port, err)
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.Parent != netlink.HANDLE_ROOT || q.Type() != "tbf" {
			continue
		}
		if a.Statistics == nil || a.Statistics.Queue == nil {
			return QdiscStats{}, fmt.Errorf("testnet: tbf on %s reports no queue statistics", p.Port)
		}
		st := a.Statistics.Queue
		return QdiscStats{BacklogBytes: st.Backlog, BacklogPackets: st.Qlen, Drops: st.Drops, Overlimits: st.Overlimits}, nil
	}
	return QdiscStats{}, fmt.Errorf("testnet: no tbf root qdisc on %s", p.Port)
}

// StartSampling samples the qdisc's backlog every interval until
// StopSampling, on its own goroutine.
func (p *ECNPort) StartSampling(every time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sampling != nil {
		return errors.New("testnet: already sampling")
	}
	p.sampling, p.done, p.samples = make(chan struct{}), make(chan struct{}), nil
	stop, done := p.sampling, p.done
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if q, err := p.Qdisc(); err == nil {
				p.mu.Lock()
				p.samples = append(p.samples, int(q.BacklogBytes))
				p.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// StopSampling stops the sampler and returns the backlog samples in bytes.
func (p *ECNPort) StopSampling() []int {
	p.mu.Lock()
	stop, done := p.sampling, p.done
	p.mu.Unlock()
	if stop == nil {
		return nil
	}
	close(stop)
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.samples
	p.sampling, p.done, p.samples = nil, nil, nil
	return s
}

// SampleQuantile returns quantile q (0 to 1) of samples (nearest rank), 0
// for none.
func SampleQuantile(samples []int, q float64) int {
	if len(samples) == 0 {
		return 0
	}
	s := append([]int(nil), samples...)
	sort.Ints(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Close stops sampling and detaches and frees the marker; tbf stays until
// ClearRate or the namespace goes.
func (p *ECNPort) Close() error {
	p.StopSampling()
	var err error
	if p.prog != nil {
		err = p.prog.Close()
		p.prog = nil
	}
	if p.nl != nil {
		p.nl.Close()
		p.nl = nil
	}
	return err
}
