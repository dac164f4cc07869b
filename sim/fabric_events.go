package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/metaroce/metaroce/transport"
)

// What happens during a fabric run: completions driving the workload,
// posting, background load and faults.

func (r *fabricRun) fail(err error) {
	if r.failed == nil {
		r.failed = err
	}
}

// hostIndex inverts hostAddr.
func hostIndex(c *transport.Conn) int32 {
	a := c.Peer().As4()
	return int32(a[1])<<16 | int32(a[2])<<8 | int32(a[3])
}

func (r *fabricRun) onCompletion(host int, now Time, c transport.Completion, up *int, failed *int) {
	switch c.Op {
	case transport.OpConnected:
		if r.cursor != nil {
			r.lazyConnected(host, now, c.Conn) // a lazy all-to-all's (alltoall.go)
			return
		}
		r.conns[host][hostIndex(c.Conn)] = c.Conn
		*up++
	case transport.OpClosed:
		if r.lazy {
			// Closed after its write (either end), or failed: a failed
			// write reports itself.
			if mi, ok := c.Conn.Context.(int32); !ok || r.ms[mi].ok {
				return
			}
		}
		r.fail(fmt.Errorf("host %d: connection to %v closed: %v", host, c.Conn.Peer(), c.Conn.Err))
	case transport.OpWrite:
		m := &r.ms[c.WRID]
		m.done = now
		if c.Status != transport.StatusOK {
			*failed++
			r.fail(fmt.Errorf("host %d: message %d: %v", host, c.WRID, c.Status))
		} else {
			m.ok = true
			r.settle(m)
		}
		if r.windowed && !m.bg {
			if r.lazy {
				r.lazyDone(now, int32(c.WRID))
			}
			if !r.lazy || !r.paired() || initiates(host, int(m.dst)) {
				r.openNext(now, host) // its slot is free (alltoall.go)
			}
		}
		r.retry(host, now)
	case transport.OpRecvWriteImm:
		m := &r.ms[c.Imm]
		if m.arrived != 0 {
			// The transport delivers a message once (§9): a second
			// arrival would be a bug, and the run says so.
			r.dupArrivals++
			return
		}
		m.arrived = now
		r.settle(m)
		if r.lazy && !m.bg {
			r.lazyArrived(now, int32(c.Imm))
		}
		if m.next >= 0 {
			r.post(now, m.next)
		}
	}
}

// settle counts a collective message done once it is both acked at its
// sender and arrived at its receiver, whichever comes last.
func (r *fabricRun) settle(m *fmsg) {
	if !m.bg && !m.settled && m.ok && m.arrived != 0 {
		m.settled = true
		r.pending--
	}
}

// post posts message i, or queues it if its connection's window is full.
func (r *fabricRun) post(now Time, i int32) {
	m := &r.ms[i]
	c := r.conns[m.src][m.dst]
	if r.lazy && !m.bg {
		c = r.wconn[i]
	}
	if m.posted == 0 {
		m.posted = now
	}
	err := c.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: r.src[:m.size], RemoteAddr: fabricAddr,
		RKey: fabricKey, Imm: uint32(i), HasImm: true})
	switch {
	case err == transport.ErrQueueFull:
		r.backlog[m.src] = append(r.backlog[m.src], i)
	case err != nil:
		r.fail(fmt.Errorf("host %d: post: %w", m.src, err))
	default:
		r.f.Hosts[m.src].Kick()
	}
}

// retry posts what host's windows refused before, in order.
func (r *fabricRun) retry(host int, now Time) {
	q := r.backlog[host]
	if len(q) == 0 {
		return
	}
	r.backlog[host] = nil
	for _, i := range q {
		r.post(now, i) // re-queues itself if still refused
	}
}

// background adds each host's Poisson stream of BgSize WRITEs towards
// bgPeer, from start until the collective completes.
func (r *fabricRun) background(start Time, bgPeer func(int) int) {
	c := &r.cfg
	mean := float64(c.BgSize*8) / (c.Background * c.Clos.HostBps * float64(c.Clos.Planes)) * 1e9
	rng := rand.New(rand.NewPCG(c.Clos.Seed, 0xb9))
	n := r.f.Net
	for i := range r.f.Hosts {
		var tick func(now Time)
		tick = func(now Time) {
			if r.pending == 0 || r.failed != nil {
				return
			}
			r.ms = append(r.ms, fmsg{src: int32(i), dst: int32(bgPeer(i)), size: int32(c.BgSize), next: -1, bg: true})
			r.post(now, int32(len(r.ms)-1))
			n.At(now+Time(rng.ExpFloat64()*mean)+1, tick)
		}
		n.At(start+Time(rng.ExpFloat64()*mean), tick)
	}
}

// faultTarget is the cable a link fault hits: leaf 0's first uplink in
// plane 0.
func (r *fabricRun) faultTarget() *Link {
	if ls := r.f.Leaves[0]; len(ls) > 0 && len(ls[0].Up) > 0 {
		return ls[0].Up[0]
	}
	return nil
}

func (r *fabricRun) scheduleFault(at Time, target *Link) error {
	f := r.f
	var do func()
	switch r.cfg.Fault {
	case "link-down":
		do = func() { f.LinkDown(target) }
	case "spine-down":
		s := f.Mids[0][0]
		if f.Cfg.Tiers == 3 {
			s = f.Tops[0][0]
		}
		do = func() { f.SwitchDown(s) }
	case "plane-down":
		if f.Cfg.Planes < 2 {
			return errors.New("sim: plane-down needs -planes 2 or more")
		}
		do = func() { f.PlaneDown(f.Cfg.Planes - 1) }
	case "degrade":
		do = func() { f.Degrade(target, r.cfg.FaultFactor, r.cfg.FaultLoss) }
	default:
		return fmt.Errorf("sim: unknown fault %q (link-down, spine-down, plane-down, degrade)", r.cfg.Fault)
	}
	f.Net.At(at, func(Time) { do() })
	return nil
}
