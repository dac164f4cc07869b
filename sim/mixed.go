package sim

import (
	"math/rand/v2"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// runMixed: Senders long flows keep Size-byte WRITEs posted (two each)
// for Duration, while one more sender writes ShortSize-byte messages at
// Poisson arrivals ShortEvery apart on average through the same port.
// The short class's ideal is its serialisation plus one base RTT (what
// it takes on an idle fabric); the long class's is its flow's share of the
// port among the long flows, for the two messages in flight, plus a base
// RTT.
func runMixed(cfg CCConfig) (*CCResult, error) {
	wall := time.Now()
	const longOutstanding = 2
	shortSlots := 64
	s, err := newStar(cfg, cfg.Senders+1, max(cfg.Size*longOutstanding, cfg.ShortSize*shortSlots))
	if err != nil {
		return nil, err
	}
	res := &CCResult{Scenario: "mixed", CC: cfg.CC, Seed: cfg.Seed, Senders: cfg.Senders, Size: cfg.Size}
	conns := make([]*transport.Conn, len(s.senders))
	// The first measured instant: long flows have ramped up.
	warm := Time(200 * time.Microsecond)
	var (
		longFCT, shortFCT []float64
		ws                []*writer
		t0, end           Time
		carried0          float64
		placed0           uint64
		shortPosted       = map[uint64]Time{}
		shortNext         uint64
		shortDone         int
	)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	sh := s.senders[cfg.Senders]
	shortRegion := s.regionOf[sh.Addr]
	shortBuf := make([]byte, cfg.ShortSize*shortSlots)
	var postShort func(now Time)
	postShort = func(now Time) {
		if now >= end {
			return
		}
		c := conns[cfg.Senders]
		i := shortNext
		slot := int(i) % shortSlots
		// Messages beyond the message window wait in the transport; the
		// arrival time is the post.
		if now >= t0+warm {
			shortPosted[i] = now
		}
		shortNext++
		if err := c.PostWrite(&transport.WorkRequest{WRID: i, Local: shortBuf[slot*cfg.ShortSize : (slot+1)*cfg.ShortSize],
			RemoteAddr: shortRegion.addr + uint64(slot*cfg.ShortSize), RKey: shortRegion.key}); err != nil {
			s.fail(err)
			return
		}
		sh.Kick()
		gap := Time(rng.ExpFloat64() * float64(cfg.ShortEvery))
		s.n.At(now+max(gap, 1), postShort)
	}
	start := func(now Time) {
		t0 = now
		end = now + Time(cfg.Duration)
		// The long flows are the first Senders hosts.
		ws = newWriters(s, s.senders[:cfg.Senders], conns, cfg.Size, longOutstanding, end, nil)
		for i, w := range ws {
			w.conn = conns[i]
			w.start(now)
		}
		s.n.At(now+warm, func(now Time) {
			carried0, placed0 = s.sent(), s.placed()
			for _, w := range ws {
				w.fct = &longFCT
			}
		})
		postShort(now)
	}
	if err := s.connect(conns, start); err != nil {
		return nil, err
	}
	onConn := sh.OnCompletion
	sh.OnCompletion = func(now Time, c transport.Completion) {
		if c.Op != transport.OpWrite {
			onConn(now, c)
			return
		}
		if c.Status != transport.StatusOK {
			res.MessagesFailed++
			return
		}
		shortDone++
		if at, ok := shortPosted[c.WRID]; ok {
			shortFCT = append(shortFCT, float64(now-at)/1e3)
			delete(shortPosted, c.WRID)
		}
	}
	s.n.Run(Time(cfg.Limit), func() bool { return s.failed != nil || (end > 0 && s.n.Now() >= end) })
	for _, w := range ws {
		res.MessagesCompleted += w.completed
		res.MessagesFailed += w.failed
	}
	res.MessagesCompleted += shortDone
	res.Utilisation = s.utilisation(carried0, t0+warm)
	if span := s.n.Now() - (t0 + warm); span > 0 {
		res.GoodputGbps = float64((s.placed()-placed0)*8) / float64(span)
	}
	gp := s.goodputRate()
	short := ClassFCT{Class: "short", Size: cfg.ShortSize, Messages: len(shortFCT),
		IdealFCTus: s.idealFCT(cfg.ShortSize, cfg.RateBps)}
	short.FCTP50us, short.FCTP99us = fctStats(shortFCT)
	// A long flow keeps longOutstanding messages in flight, which share
	// its rate: each takes that many messages' time at the flow's share.
	long := ClassFCT{Class: "long", Size: cfg.Size, Messages: len(longFCT),
		IdealFCTus: s.idealFCT(cfg.Size*longOutstanding, gp/float64(cfg.Senders))}
	long.FCTP50us, long.FCTP99us = fctStats(longFCT)
	for _, c := range []*ClassFCT{&short, &long} {
		if c.IdealFCTus > 0 {
			c.P99OverIdeal = roundTo(c.FCTP99us/c.IdealFCTus, 3)
		}
	}
	res.Classes = []ClassFCT{short, long}
	res.FCTP50us, res.FCTP99us, res.IdealFCTus, res.P99OverIdeal = short.FCTP50us, short.FCTP99us, short.IdealFCTus, short.P99OverIdeal
	s.finish(res, wall)
	return res, nil
}
