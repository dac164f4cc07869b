package compliance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Options configure a run.
type Options struct {
	Target netip.Addr // the implementation under test
	Local  netip.Addr // the suite's address; the target must reach it
	// AltLocal, if valid, is a second local address, for the cases about
	// a packet from the wrong address (§7.4, §7.6).
	AltLocal netip.Addr
	Port     uint16 // MetaRoCE port of both ends (§2.2); 0: 4792
	// Listen opens a UDP socket (default net.ListenUDP); -spawn passes one
	// that binds inside a network namespace.
	Listen func(network string, laddr netip.AddrPort) (*net.UDPConn, error)
	// Memory is what the target exposes; nil skips the memory cases.
	Memory *Memory
	// Service to connect to when the target exposes no memory (the
	// handshake needs a service the target serves); 0 with Memory set:
	// Memory.Service.
	Service uint32
	// Timeout bounds every wait for a reply; Quiet is how long the suite
	// listens where nothing may come back. The spec's own bounds are
	// microseconds (§5.5); these are generous for a loaded machine.
	Timeout, Quiet time.Duration
	// DSCPData and DSCPControl are the target's configured classes
	// (§2.4); -1 skips the check.
	DSCPData, DSCPControl int
	// ReplyRate is the target's limit on stateless replies per
	// millisecond (§7.8; the reference default is 64); 0 skips the check.
	ReplyRate int
	// Run selects cases by id or clause prefix (empty: all).
	Run []string
	// Expected lists cases that are expected to fail, with the reason
	// (a known deviation); they are reported as xfail.
	Expected map[string]string
}

func (o *Options) defaults() {
	if o.Port == 0 {
		o.Port = wire.DefaultPort
	}
	if o.Listen == nil {
		o.Listen = func(n string, a netip.AddrPort) (*net.UDPConn, error) {
			return net.ListenUDP(n, net.UDPAddrFromAddrPort(a))
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = 300 * time.Millisecond
	}
	if o.Quiet <= 0 {
		o.Quiet = 60 * time.Millisecond
	}
	if o.Service == 0 && o.Memory != nil {
		o.Service = o.Memory.Service
	}
}

// Level is the strength of the requirement a case checks.
type Level uint8

const (
	Must   Level = iota // MUST, or behaviour two ends need to interoperate
	Should              // SHOULD: a miss is a warning
)

// Need is what a case needs from the target beyond its address.
type Need uint8

const (
	NeedMemory Need = 1 << iota // regions and receive buffers
	NeedEvents                  // receive completions
	NeedAlt                     // a second local address
)

// Case is one check.
type Case struct {
	ID     string   // stable name
	Clause string   // the clause it checks, "7.3"
	Also   []string // further clauses it exercises
	Title  string
	Level  Level
	Needs  Need
	Run    func(t *T)
}

// Status of a finished case.
const (
	StatusPass  = "pass"
	StatusFail  = "fail"
	StatusSkip  = "skip"
	StatusWarn  = "warn"  // a SHOULD not met
	StatusXFail = "xfail" // failed as Options.Expected says
)

// T is a running case: its connections, the packets it received and its
// verdict.
type T struct {
	c       *Case
	o       *Options
	p       *peer
	seen    []*rxPacket
	conns   []*Conn
	status  string
	reason  string
	start   time.Time
	notes   []string
	cleanup []func()
}

type stopCase struct{}

// Fatalf fails the case and stops it.
func (t *T) Fatalf(format string, args ...any) {
	t.status, t.reason = StatusFail, fmt.Sprintf(format, args...)
	panic(stopCase{})
}

// Skipf skips the case and stops it.
func (t *T) Skipf(format string, args ...any) {
	t.status, t.reason = StatusSkip, fmt.Sprintf(format, args...)
	panic(stopCase{})
}

// Notef adds a line to the case's report (what was observed).
func (t *T) Notef(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// check fails the case unless ok.
func (t *T) check(ok bool, format string, args ...any) {
	if !ok {
		t.Fatalf(format, args...)
	}
}

func (t *T) must(err error) {
	if err != nil {
		t.Fatalf("suite: %v", err)
	}
}

// mem returns the target's memory or skips the case.
func (t *T) mem() *Memory {
	if t.o.Memory == nil {
		t.Skipf("the target exposes no memory (docs/compliance.md)")
	}
	return t.o.Memory
}

// pull moves what the receive loop has queued into seen, waiting until
// deadline for at least one packet.
func (t *T) pull(deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		select {
		case r := <-t.p.in:
			t.take(r)
			return true
		default:
			return false
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case r := <-t.p.in:
		t.take(r)
		for {
			select {
			case r := <-t.p.in:
				t.take(r)
			default:
				return true
			}
		}
	case <-tm.C:
		return false
	}
}

// take files a received packet. A PROBE of one of the case's connections
// is answered at once, as a receiver must (§4.4): a target that probes a
// path it holds suspect (when a case holds back its acks) gets it back.
func (t *T) take(r *rxPacket) {
	t.seen = append(t.seen, r)
	if r.err != nil || r.pkt.Class != wire.ClassData || r.pkt.Data().Opcode() != wire.OpProbe {
		return
	}
	for _, c := range t.conns {
		if c.ID == r.pkt.Data().DstConn() && c.Peer != 0 {
			r.used = true
			c.record(r.pkt.Data())
			c.ackPath(r.pkt.Data().PathID())
		}
	}
}

// wait returns the first unconsumed packet matching f that arrives (or
// arrived) within d, consuming it; nil if none.
func (t *T) wait(d time.Duration, f func(*rxPacket) bool) *rxPacket {
	deadline := time.Now().Add(d)
	i := 0
	for {
		for ; i < len(t.seen); i++ {
			r := t.seen[i]
			if !r.used && f(r) {
				r.used = true
				return r
			}
		}
		if !t.pull(deadline) && time.Now().After(deadline) {
			return nil
		}
	}
}

// expect is wait with the case's timeout, failing the case on silence.
func (t *T) expect(what string, f func(*rxPacket) bool) *rxPacket {
	r := t.wait(t.o.Timeout, f)
	if r == nil {
		t.Fatalf("no %s within %v", what, t.o.Timeout)
	}
	return r
}

// none fails the case if a packet matching f arrives within the quiet
// window (or already arrived unconsumed).
func (t *T) none(what string, f func(*rxPacket) bool) {
	if r := t.wait(t.o.Quiet, f); r != nil {
		t.Fatalf("%s: got %v", what, r)
	}
}

// collect gathers every packet matching f that arrives within d.
func (t *T) collect(d time.Duration, f func(*rxPacket) bool) []*rxPacket {
	var out []*rxPacket
	deadline := time.Now().Add(d)
	for {
		r := t.wait(time.Until(deadline), f)
		if r == nil {
			return out
		}
		out = append(out, r)
	}
}

// send sends raw bytes to the target.
func (t *T) send(b []byte, so sendOpts) { t.must(t.p.send(b, so)) }

// Result is one case's outcome.
type Result struct {
	ID      string   `json:"id"`
	Clause  string   `json:"clause"`
	Also    []string `json:"also,omitempty"`
	Title   string   `json:"title"`
	Level   string   `json:"level"`
	Status  string   `json:"status"`
	Reason  string   `json:"reason,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	Seconds float64  `json:"seconds"`
}

// Run runs the selected cases against the target, one at a time.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if !o.Target.IsValid() || !o.Local.IsValid() {
		return nil, errors.New("compliance: target and local addresses are required")
	}
	if o.Service == 0 {
		return nil, errors.New("compliance: no service to connect to (expose memory, or give a service)")
	}
	p, err := newPeer(&o)
	if err != nil {
		return nil, err
	}
	defer p.close()
	if err := warmUp(&o, p); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Target: netip.AddrPortFrom(o.Target, o.Port).String()}
	for i := range Cases {
		c := &Cases[i]
		if !selected(c, o.Run) {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rep.Cases = append(rep.Cases, runCase(c, &o, p))
	}
	rep.finish(time.Since(start))
	return rep, nil
}

func selected(c *Case, sel []string) bool {
	if len(sel) == 0 {
		return true
	}
	for _, s := range sel {
		if s == c.ID || s == c.Clause || strings.HasPrefix(c.Clause, s+".") {
			return true
		}
	}
	return false
}

func runCase(c *Case, o *Options, p *peer) (res Result) {
	t := &T{c: c, o: o, p: p, status: StatusPass, start: time.Now()}
	res = Result{ID: c.ID, Clause: c.Clause, Also: c.Also, Title: c.Title, Level: "MUST"}
	if c.Level == Should {
		res.Level = "SHOULD"
	}
	// Drop what earlier cases left queued: late acks of their connections.
	for t.pull(time.Time{}) {
	}
	t.seen = t.seen[:0]
	switch {
	case c.Needs&(NeedMemory|NeedEvents) != 0 && o.Memory == nil:
		t.status, t.reason = StatusSkip, "the target exposes no memory (docs/compliance.md)"
	case c.Needs&NeedEvents != 0 && o.Memory.Events == nil:
		t.status, t.reason = StatusSkip, "the target reports no receive completions (docs/compliance.md)"
	case c.Needs&NeedAlt != 0 && !o.AltLocal.IsValid():
		t.status, t.reason = StatusSkip, "needs a second local address (-alt)"
	default:
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(stopCase); !ok {
						buf := make([]byte, 4096)
						buf = buf[:runtime.Stack(buf, false)]
						t.status, t.reason = StatusFail, fmt.Sprintf("suite panic: %v\n%s", r, buf)
					}
				}
			}()
			c.Run(t)
		}()
		for _, cn := range t.conns {
			cn.close()
		}
		for _, f := range t.cleanup {
			f()
		}
	}
	if t.status == StatusFail && c.Level == Should {
		t.status, t.reason = StatusWarn, "SHOULD not met: "+t.reason
	}
	if t.status == StatusFail {
		if why, ok := o.Expected[c.ID]; ok {
			t.status, t.reason = StatusXFail, t.reason+" (expected: "+why+")"
		}
	}
	res.Status, res.Reason, res.Notes = t.status, t.reason, t.notes
	res.Seconds = time.Since(t.start).Seconds()
	return res
}

// warmUp exchanges a CONNECT and its CHALLENGE from each local address
// before the first case, retrying, so that what a first packet costs (a
// neighbour resolution at the target, during which an AF_XDP target loses
// its reply, as any host may lose a packet) is not charged to a case.
func warmUp(o *Options, p *peer) error {
	locals := []netip.Addr{o.Local}
	if o.AltLocal.IsValid() {
		locals = append(locals, o.AltLocal)
	}
	for _, l := range locals {
		t := &T{c: &Case{ID: "warm-up"}, o: o, p: p}
		c := &Conn{t: t, ID: rand32() | 1, InitPSN: 1, from: l}
		deadline := time.Now().Add(5 * time.Second)
		for {
			h := c.connectHeader(connOpts{}, [wire.CookieLen]byte{})
			if err := p.send(wire.AppendConn(nil, &h), sendOpts{from: l}); err != nil {
				return err
			}
			r := t.wait(50*time.Millisecond, func(r *rxPacket) bool {
				return isConnTo(c.ID, wire.OpChallenge)(r) || isConnTo(c.ID, wire.OpReject)(r)
			})
			if r != nil && r.pkt.Conn().Opcode() == wire.OpReject {
				return fmt.Errorf("compliance: the target %v does not serve service %#x (REJECT reason %d)", o.Target, o.Service, r.pkt.Conn().Reason())
			}
			if r != nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("compliance: the target %v does not answer a CONNECT from %v with a CHALLENGE", o.Target, l)
			}
		}
	}
	return nil
}
