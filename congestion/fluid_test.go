package congestion

import (
	"math"
	"sort"
	"testing"
	"time"
)

// A fluid model of one bottleneck: N senders, each driven by a real
// Controller, share a link of capacity C behind a FIFO queue. Each step
// of dt, a sender puts min(pacing rate x dt, window - in flight) bytes
// into the queue (its NIC rate when unpaced); the queue grows by what
// arrives minus C x dt; the bytes see RTT = base + queue / C, are CE
// marked when they join a queue above K, reach the receiver after half
// the base RTT plus their queueing, and are acked half a base RTT later.
// Feedback is thus delayed exactly as in a network, with no packets:
// what it shows is the control loop, not packetisation noise.

const (
	gbps = 1e9 / 8 // bytes per second in one Gb/s
	kb   = 1000
	us   = time.Microsecond
	ms   = time.Millisecond
)

type link struct {
	capacity float64       // bytes per second
	base     time.Duration // unloaded RTT
	markK    float64       // mark bytes joining a queue above this; 0 never
	buffer   float64       // drop beyond; 0 unbounded
	// RED marking as DCQCN's switches do it: probability rising from 0
	// at kmin to pmax at kmax, 1 above; drawn per packet, so a faster
	// flow is more likely to see a mark in a CNP interval.
	kmin, kmax, pmax float64
}

func (l link) red(kmin, kmax, pmax float64) link {
	l.markK, l.kmin, l.kmax, l.pmax = 0, kmin, kmax, pmax
	return l
}

// markP is the RED marking probability at queue q.
func (l link) markP(q float64) float64 {
	switch {
	case l.kmax == 0 || q <= l.kmin:
		return 0
	case q > l.kmax:
		return 1
	}
	return l.pmax * (q - l.kmin) / (l.kmax - l.kmin)
}

// bottleneck100G is the model's default link: 100 Gb/s, 10 us base RTT,
// BDP 125 KB, ECN above 100 KB (8 us of queue, above metaroce's 5 us
// target, so the delay loop leads and ECN is the backstop).
func bottleneck100G() link {
	return link{capacity: 100 * gbps, base: 10 * us, markK: 100 * kb}
}

func (l link) markAbove(k float64) link    { l.markK = k; return l }
func (l link) bufferOf(b float64) link     { l.buffer = b; return l }
func (l link) bdp() float64                { return l.capacity * l.base.Seconds() }
func (l link) lineRate() uint64            { return uint64(l.capacity * 8) }
func (l link) queueDelay(q float64) string { return time.Duration(q / l.capacity * 1e9).String() }

type flow struct {
	cc       Controller
	id       uint64
	start    Time
	inflight float64
	minRTT   time.Duration
	sent     carry
	acked    carry
	marked   carry
	got      float64 // bytes acked, total
	window   []float64
}

// carry turns the fluid's fractional bytes into the ints the API takes
// without losing the remainders.
type carry float64

func (c *carry) take(x float64) int {
	*c += carry(x)
	n := math.Floor(float64(*c))
	*c -= carry(n)
	return int(n)
}

type slot struct {
	recv, ack, marked, rttBytes, lost []float64
	hint                              []uint64
}

type model struct {
	t     *testing.T
	l     link
	dt    time.Duration
	now   Time
	step  int
	flows []*flow
	ring  []slot
	half  int // steps in half a base RTT
	q     float64
	fs    *FairShare
	rng   uint64

	// Recorded from `from` on.
	from               Time
	departed, capTotal float64
	queue              []float64
	drops              float64
	// per flow, bytes acked in each sample window of `bin`
	bin  time.Duration
	bins [][]float64
	cur  []float64
	binT Time
}

func newModel(t *testing.T, l link) *model {
	dt := 250 * time.Nanosecond
	m := &model{t: t, l: l, dt: dt, half: int(l.base / 2 / dt), bin: 5 * l.base}
	maxDelay := l.base + 20*ms // a generous bound on queueing delay
	if l.buffer > 0 {
		maxDelay = l.base + time.Duration(l.buffer/l.capacity*1e9)
	}
	m.ring = make([]slot, int(maxDelay/dt)+m.half+4)
	return m
}

// cfg is the Config the transport would build for this link.
func (m *model) cfg() Config {
	return Config{MSS: 4096, LineRate: m.l.lineRate(), BaseRTT: m.l.base}
}

// add adds a sender running algorithm name that starts at `at`.
func (m *model) add(name string, at time.Duration, tweak ...func(*Config)) *flow {
	c := m.cfg()
	for _, f := range tweak {
		f(&c)
	}
	cc, err := New(name, c)
	if err != nil {
		m.t.Fatal(err)
	}
	f := &flow{cc: cc, id: uint64(len(m.flows) + 1), start: int64(at)}
	m.flows = append(m.flows, f)
	for i := range m.ring {
		s := &m.ring[i]
		s.recv = append(s.recv, 0)
		s.ack = append(s.ack, 0)
		s.marked = append(s.marked, 0)
		s.rttBytes = append(s.rttBytes, 0)
		s.lost = append(s.lost, 0)
		s.hint = append(s.hint, 0)
	}
	return f
}

// senders adds n senders of name starting every `every` from 0.
func (m *model) senders(n int, name string, every time.Duration, tweak ...func(*Config)) {
	for i := 0; i < n; i++ {
		m.add(name, time.Duration(i)*every, tweak...)
	}
}

// withFairShare makes the receiver compute hints with a FairShare.
func (m *model) withFairShare(cfg FairShareConfig) {
	cfg.LineRate = m.l.lineRate()
	fs, err := NewFairShare(cfg)
	if err != nil {
		m.t.Fatal(err)
	}
	m.fs = fs
}

// record starts the measurements at `at`.
func (m *model) record(at time.Duration) { m.from = int64(at) }

func (m *model) run(d time.Duration) {
	end := m.now + int64(d)
	if m.cur == nil {
		m.cur = make([]float64, len(m.flows))
	}
	for m.now < end {
		m.tick()
	}
}

// rand is a deterministic xorshift in [0, 1).
func (m *model) rand() float64 {
	if m.rng == 0 {
		m.rng = 0x9e3779b97f4a7c15
	}
	m.rng ^= m.rng << 13
	m.rng ^= m.rng >> 7
	m.rng ^= m.rng << 17
	return float64(m.rng>>11) / (1 << 53)
}

func (m *model) slotAt(step int) *slot { return &m.ring[step%len(m.ring)] }

func (m *model) tick() {
	s := m.slotAt(m.step)
	// Arrivals at the receiver: it learns who sends, and its hint rides
	// the ack that leaves now and reaches the sender half an RTT later.
	for i, f := range m.flows {
		if r := s.recv[i]; r > 0 && m.fs != nil {
			m.slotAt(m.step + m.half).hint[i] = m.fs.Observe(m.now, f.id, int(r))
		}
		s.recv[i] = 0
	}
	// Acks and losses back at the senders.
	for i, f := range m.flows {
		if lost := s.lost[i]; lost > 0 {
			f.inflight -= lost
			f.cc.OnLoss(m.now, int(lost))
			s.lost[i] = 0
		}
		a := s.ack[i]
		if a <= 0 {
			s.hint[i] = 0
			continue
		}
		rtt := time.Duration(s.rttBytes[i] / a)
		if f.minRTT == 0 || rtt < f.minRTT {
			f.minRTT = rtt
		}
		f.inflight = max(f.inflight-a, 0)
		f.got += a
		if m.now >= m.from {
			m.cur[i] += a
		}
		f.cc.OnAck(m.now, AckSample{Bytes: f.acked.take(a), Marked: f.marked.take(s.marked[i]),
			RTT: rtt, MinRTT: f.minRTT, Path: 0, RateHint: s.hint[i], InFlight: int(f.inflight)})
		s.ack[i], s.marked[i], s.rttBytes[i], s.hint[i] = 0, 0, 0, 0
	}
	// Senders.
	dts := m.dt.Seconds()
	var sends [64]float64
	send := sends[:0]
	total := 0.0
	for _, f := range m.flows {
		x := 0.0
		if m.now >= f.start {
			f.cc.OnTick(m.now)
			rate := float64(f.cc.PacingRate()) / 8
			if rate == 0 || rate > m.l.capacity {
				rate = m.l.capacity // the sender's NIC runs at the link's rate
			}
			x = max(0, min(rate*dts, float64(f.cc.Window())-f.inflight))
			if n := f.sent.take(x); n > 0 {
				f.cc.OnSent(m.now, n)
			}
		}
		send = append(send, x)
		total += x
	}
	// The queue.
	out := min(m.q+total, m.l.capacity*dts)
	m.q = m.q + total - out
	drop := 0.0
	if m.l.buffer > 0 && m.q > m.l.buffer {
		drop = m.q - m.l.buffer
		m.q = m.l.buffer
	}
	qdelay := time.Duration(m.q / m.l.capacity * 1e9)
	mark := m.l.markK > 0 && m.q > m.l.markK
	p := m.l.markP(m.q)
	rs := m.step + m.half + int(qdelay/m.dt) + 1
	for i, f := range m.flows {
		x := send[i]
		if x == 0 {
			continue
		}
		f.inflight += x
		lost := 0.0
		if drop > 0 {
			lost = drop * x / total
		}
		ok := x - lost
		r := m.slotAt(rs)
		r.recv[i] += ok
		a := m.slotAt(rs + m.half)
		a.ack[i] += ok
		a.rttBytes[i] += ok * float64(m.l.base+qdelay)
		switch {
		case mark:
			a.marked[i] += ok
		case p > 0:
			// At least one of the x/MSS packets marked?
			if m.rand() < 1-math.Pow(1-p, x/4096) {
				a.marked[i] += min(ok, 4096)
			}
		}
		if lost > 0 {
			// Detected as lost about when its ack would have come.
			a.lost[i] += lost
		}
	}
	if m.now >= m.from {
		m.departed += out
		m.capTotal += m.l.capacity * dts
		m.queue = append(m.queue, m.q)
		m.drops += drop
		if m.binT == 0 {
			m.binT = m.now
		}
		if m.now-m.binT >= int64(m.bin) {
			m.bins = append(m.bins, m.cur)
			m.cur = make([]float64, len(m.flows))
			m.binT = m.now
		}
	}
	m.now += int64(m.dt)
	m.step++
}

// The figures a scenario asserts.

func (m *model) utilisation() float64 { return m.departed / m.capTotal }

func (m *model) queueMax() float64 {
	q := 0.0
	for _, v := range m.queue {
		q = max(q, v)
	}
	return q
}

func (m *model) queueMean() float64 {
	s := 0.0
	for _, v := range m.queue {
		s += v
	}
	return s / float64(len(m.queue))
}

func (m *model) queueP99() float64 {
	v := append([]float64(nil), m.queue...)
	sort.Float64s(v)
	return v[len(v)*99/100]
}

// jain is Jain's fairness index of x.
func jain(x []float64) float64 {
	s, s2 := 0.0, 0.0
	for _, v := range x {
		s += v
		s2 += v * v
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(x)) * s2)
}

// jainOver is Jain's index of the flows' throughput in each bin, over
// the flows in active (indices), in time order.
func (m *model) jainOver(active []int) []float64 {
	out := make([]float64, len(m.bins))
	x := make([]float64, len(active))
	for b, bin := range m.bins {
		for j, i := range active {
			x[j] = bin[i]
		}
		out[b] = jain(x)
	}
	return out
}

// settledAfter is the time from the start of recording until Jain's
// index over the active flows reached at least j and stayed there, or -1.
func (m *model) settledAfter(active []int, j float64) time.Duration {
	js := m.jainOver(active)
	last := -1
	for b, v := range js {
		if v < j {
			last = b
		}
	}
	if last == len(js)-1 {
		return -1
	}
	return time.Duration(last+1) * m.bin
}

func (m *model) rtts(d time.Duration) float64 { return float64(d) / float64(m.l.base) }

func idx(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}

// settle is how long after `from` Jain's index over active flows reached
// j and stayed there until `to` (times relative to the recording start);
// -1 if it never did.
func (m *model) settle(active []int, from, to time.Duration, j float64) time.Duration {
	js := m.jainOver(active)
	b0, b1 := int(from/m.bin), min(int(to/m.bin), len(js))
	last := b0 - 1
	for b := b0; b < b1; b++ {
		if js[b] < j {
			last = b
		}
	}
	if last == b1-1 {
		return -1
	}
	return time.Duration(last+1-b0) * m.bin
}

// queueStats summarises the queue between from and to (relative to the
// recording start).
func (m *model) queueStats(from, to time.Duration) (maxQ, meanQ float64) {
	a, b := int(from/m.dt), min(int(to/m.dt), len(m.queue))
	s := 0.0
	for _, v := range m.queue[a:b] {
		maxQ = max(maxQ, v)
		s += v
	}
	return maxQ, s / float64(b-a)
}
