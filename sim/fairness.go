package sim

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// writer keeps Outstanding WRITEs of one size posted on a connection from
// its start until stop, and records each one's completion time.
type writer struct {
	s           *star
	host        *Host
	conn        *transport.Conn
	region      regionSpan
	buf         []byte
	size        int
	outstanding int
	stop        Time
	posted      []Time // by WRID
	fct         *[]float64
	completed   int
	failed      int
}

func (w *writer) post(now Time) {
	if now >= w.stop {
		return
	}
	i := len(w.posted)
	slot := i % w.outstanding
	w.posted = append(w.posted, now)
	off := uint64(slot * w.size)
	if err := w.conn.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: w.buf[slot*w.size : (slot+1)*w.size],
		RemoteAddr: w.region.addr + off, RKey: w.region.key}); err != nil {
		w.s.fail(err)
		return
	}
	w.host.Kick()
}

func (w *writer) start(now Time) {
	for range w.outstanding {
		w.post(now)
	}
}

// completion handles the writer's completions after the connection is up.
func (w *writer) completion(now Time, c transport.Completion) bool {
	if c.Op != transport.OpWrite {
		return false
	}
	if c.Status != transport.StatusOK {
		w.failed++
		w.s.fail(fmt.Errorf("%v: write: %v", w.host.Addr, c.Status))
		return true
	}
	w.completed++
	if w.fct != nil {
		*w.fct = append(*w.fct, float64(now-w.posted[c.WRID])/1e3)
	}
	w.post(now)
	return true
}

// newWriters makes one writer for each of hosts (the first senders of s),
// wired into its completions.
func newWriters(s *star, hosts []*Host, conns []*transport.Conn, size, outstanding int, stop Time, fct *[]float64) []*writer {
	ws := make([]*writer, len(hosts))
	for i, h := range hosts {
		w := &writer{s: s, host: h, region: s.regionOf[h.Addr], buf: make([]byte, size*outstanding),
			size: size, outstanding: outstanding, stop: stop, fct: fct}
		ws[i] = w
		onConn := h.OnCompletion
		h.OnCompletion = func(now Time, c transport.Completion) {
			if w.conn == nil {
				w.conn = conns[i]
			}
			if w.conn == nil || !w.completion(now, c) {
				onConn(now, c)
			}
		}
	}
	return ws
}

// runFairness: Senders long flows to one receiver, flow i joining at
// i x JoinEvery and all running until Duration after the last joined.
// Every WindowRTTs base RTTs the goodput of each joined flow over the
// window (bytes placed at the receiver) gives one Jain index.
func runFairness(cfg CCConfig) (*CCResult, error) {
	wall := time.Now()
	const outstanding = 4
	s, err := newStar(cfg, cfg.Senders, cfg.Size*outstanding)
	if err != nil {
		return nil, err
	}
	res := &CCResult{Scenario: "fairness", CC: cfg.CC, Seed: cfg.Seed, Senders: cfg.Senders, Size: cfg.Size,
		WindowRTTs: 10, SettleRTTs: 40}
	conns := make([]*transport.Conn, cfg.Senders)
	var (
		ws                      []*writer
		t0, end                 Time
		windows                 []float64 // Jain per window
		windowJoined            []int     // flows joined during each window
		windowEnd               []Time
		carried0                float64
		last                    []uint64
		placedBefore, placedEnd []uint64
	)
	win := Time(res.WindowRTTs * float64(s.baseRTT))
	placed := func(i int) uint64 {
		if c := s.rconn[s.senders[i].Addr]; c != nil {
			return c.Stats().BytesPlaced
		}
		return 0
	}
	var sample func(now Time)
	sample = func(now Time) {
		k := min(int((now-t0)/Time(cfg.JoinEvery))+1, cfg.Senders) // flows joined by now
		x := make([]float64, 0, k)
		for i := range k {
			p := placed(i)
			// A flow that joined inside this window is judged from the
			// next one on.
			if joinAt := t0 + Time(i)*Time(cfg.JoinEvery); joinAt <= now-win {
				x = append(x, float64(p-last[i]))
			}
			last[i] = p
		}
		if len(x) > 0 {
			windows = append(windows, jain(x))
			windowJoined = append(windowJoined, len(x))
			windowEnd = append(windowEnd, now)
		}
		if now+win <= end {
			s.n.At(now+win, sample)
		}
	}
	start := func(now Time) {
		t0 = now
		end = now + Time(cfg.Senders-1)*Time(cfg.JoinEvery) + Time(cfg.Duration)
		carried0 = s.sent()
		last = make([]uint64, cfg.Senders)
		ws = newWriters(s, s.senders, conns, cfg.Size, outstanding, end, nil)
		for i, w := range ws {
			w.conn = conns[i]
			s.n.At(now+Time(i)*Time(cfg.JoinEvery), w.start)
		}
		// Goodput per flow over the last Duration, when all have joined.
		s.n.At(end-Time(cfg.Duration), func(Time) {
			placedBefore = make([]uint64, cfg.Senders)
			for i := range placedBefore {
				placedBefore[i] = placed(i)
			}
		})
		s.n.At(end, func(Time) {
			placedEnd = make([]uint64, cfg.Senders)
			for i := range placedEnd {
				placedEnd[i] = placed(i)
			}
		})
		s.n.At(now+win, sample)
	}
	if err := s.connect(conns, start); err != nil {
		return nil, err
	}
	s.n.Run(Time(cfg.Limit), func() bool { return s.failed != nil || (end > 0 && s.n.Now() >= end) })
	for _, w := range ws {
		res.MessagesCompleted += w.completed
		res.MessagesFailed += w.failed
	}
	// Convergence after each join (flows 2..N): windows count a flow
	// from the first window that starts after it joined.
	settle := Time(res.SettleRTTs * float64(s.baseRTT))
	var sum float64
	var nsum int
	res.JainMin = 1
	for k := 1; k < cfg.Senders; k++ {
		joinAt := t0 + Time(k)*Time(cfg.JoinEvery)
		nextAt := joinAt + Time(cfg.JoinEvery)
		if k == cfg.Senders-1 {
			nextAt = end
		}
		conv := -1.0
		for w, j := range windows {
			if windowJoined[w] != k+1 || windowEnd[w] > nextAt {
				continue
			}
			if conv < 0 && j >= 0.95 {
				conv = roundTo(float64(windowEnd[w]-joinAt)/float64(s.baseRTT), 1)
			}
			if windowEnd[w]-win >= joinAt+settle {
				sum += j
				nsum++
				res.JainMin = min(res.JainMin, j)
			}
		}
		res.ConvergeRTTs = append(res.ConvergeRTTs, conv)
	}
	if nsum > 0 {
		res.JainFairness = roundTo(sum/float64(nsum), 4)
	}
	res.JainMin = roundTo(res.JainMin, 4)
	if placedEnd != nil && placedBefore != nil {
		var total uint64
		for i := range placedEnd {
			b := placedEnd[i] - placedBefore[i]
			total += b
			res.FlowGbps = append(res.FlowGbps, roundTo(float64(b*8)/float64(cfg.Duration), 2))
		}
		res.GoodputGbps = float64(total*8) / float64(cfg.Duration)
	}
	res.Utilisation = s.utilisation(carried0, t0)
	res.IdealFCTus = s.idealFCT(cfg.Size*outstanding, s.goodputRate()/float64(cfg.Senders))
	s.finish(res, wall)
	return res, nil
}
