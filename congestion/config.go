package congestion

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config configures a controller. Zero fields take the defaults in
// Defaults (resolved once by Validate, which New calls); the transport
// fills MSS, LineRate and BaseRTT from its own configuration.
type Config struct {
	// MSS is the payload bytes per data packet.
	MSS int
	// InitialWindow is the window before any feedback, in bytes.
	InitialWindow int
	// MaxWindow caps the window, in bytes.
	MaxWindow int
	// MinWindow is the smallest window metaroce keeps internally, in
	// bytes; it may be below one MSS: Window() still allows one packet,
	// and the pacing rate (window / RTT) spaces packets out further.
	MinWindow float64
	// LineRate is the sender's NIC rate in bits per second; 0 unknown.
	// Pacing never exceeds it and DCQCN starts (and recovers) to it.
	LineRate uint64
	// BaseRTT is the expected unloaded RTT, used until samples arrive.
	BaseRTT time.Duration
	// PacingGain multiplies window/srtt into the pacing rate.
	PacingGain float64

	Metaroce MetaroceConfig
	Hint     HintConfig
	DCQCN    DCQCNConfig
}

// MetaroceConfig holds the knobs of the default algorithm.
type MetaroceConfig struct {
	// TargetQueue is the queueing delay allowed above the base RTT: the
	// target delay is min RTT + TargetQueue.
	TargetQueue time.Duration
	// AI is the additive increase, in MSS per RTT, while below target.
	AI float64
	// Beta scales the delay-based decrease: window *= 1 - Beta x
	// (RTT - target) / RTT.
	Beta float64
	// MaxMD bounds any one decrease (delay, ECN or loss): window *= at
	// least 1 - MaxMD.
	MaxMD float64
	// G is DCTCP's EWMA gain for alpha, the marked fraction per RTT.
	G float64
	// FlowScaleRange is the most flow scaling adds to the target (for a
	// window of 0.1 MSS); negative disables it.
	FlowScaleRange time.Duration
}

// HintConfig holds the knobs of receiver-hint.
type HintConfig struct {
	// WindowGain: the window is hint x srtt x WindowGain, so the window
	// never binds before the paced rate does.
	WindowGain float64
	// LifetimeRTTs: a hint older than this many smoothed RTTs is stale
	// and the controller falls back to metaroce.
	LifetimeRTTs float64
}

// DCQCNConfig holds DCQCN's parameters (names as in Zhu et al., SIGCOMM
// 2015, §3 and Table 1 there).
type DCQCNConfig struct {
	G           float64       // alpha's EWMA gain
	CNPInterval time.Duration // at most one rate cut per interval (the NP's N)
	AlphaTimer  time.Duration // alpha decays once per AlphaTimer without a CNP (K)
	RateTimer   time.Duration // rate-increase timer period (T)
	ByteCounter int           // bytes sent per byte-counter event (B)
	F           int           // fast-recovery steps before additive increase
	RAI         uint64        // additive increase of the target rate, bits/s
	RHAI        uint64        // hyper increase step, bits/s
	MinRate     uint64        // floor of the current rate, bits/s
	WindowRTTs  float64       // window = rate x RTT x WindowRTTs
}

// Defaults are the values Validate fills into zero fields, each with its
// reason. Fields derived from others (InitialWindow, MaxWindow, MinWindow)
// are computed in Validate and documented there.
var Defaults = Config{
	// 1500-byte MTU minus IPv6, UDP and the MetaRoCE data header and
	// trailer, rounded down: what the transport sends at its default MTU.
	MSS: 1400,
	// A small fabric's unloaded RTT (a few switch hops and the host
	// stacks). Only used until the first sample.
	BaseRTT: 10 * time.Microsecond,
	// 1.2: enough headroom that pacing does not hold the flow below its
	// window when RTT jitters, small enough that a window is spread over
	// most of an RTT instead of leaving at line rate (the issue's
	// "never burst a full window"). BBR's and Swift's pacers use a gain
	// of this order (1.25 and cwnd/rtt respectively).
	PacingGain: 1.2,
	Metaroce: MetaroceConfig{
		// 5 us of queue: at 100 Gb/s 62 KB, ~45 packets of 1400 bytes.
		// DCTCP needs K > C x RTT / 7 to keep the link busy through the
		// sawtooth (18 KB at 100 Gb/s x 10 us); 5 us is ~3x that, and
		// half a base RTT, so a short message waits at most ~1.5 base
		// RTTs behind long flows. Swift uses a target of this order
		// (base target plus a per-hop allowance of ~1 us per hop).
		TargetQueue: 5 * time.Microsecond,
		// One MSS per RTT: the TCP/DCTCP/Swift additive increase.
		AI: 1,
		// Swift's beta = 0.8 and max_mdf = 0.5 (Kumar et al., SIGCOMM
		// 2020, §3.1): cut in proportion to the excess delay, never by
		// more than half at once.
		Beta:  0.8,
		MaxMD: 0.5,
		// DCTCP's g = 1/16 (Alizadeh et al., SIGCOMM 2010, §3.4).
		G: 1.0 / 16,
		// 4 x TargetQueue: at 4 KB MSS a 13-packet flow aims 0.6 us
		// higher than a 30-packet one, which converges 2 flows to a
		// Jain index of 0.95 in ~35 RTTs in the fluid model (~65 with
		// half the range); a one-packet flow aims 5.9 us higher, room
		// for N small flows' simultaneous increase. (Swift uses a range
		// of several base targets too.)
		FlowScaleRange: 20 * time.Microsecond,
	},
	Hint: HintConfig{
		// 1.25: the window covers the hinted rate with 25% slack for RTT
		// jitter, so the pacer, not the window, sets the rate.
		WindowGain: 1.25,
		// Four RTTs: a receiver hints in every ack, so four RTTs without
		// one means it has stopped (or acks are lost); then the sender's
		// own signals take over.
		LifetimeRTTs: 4,
	},
	DCQCN: DCQCNConfig{
		// Zhu et al. 2015, Table 1: g = 1/256, K = 55 us, T = 55 us,
		// B = 10 MB; the NP sends at most one CNP per N = 50 us; F = 5
		// fast-recovery steps as in QCN (IEEE 802.1Qau).
		G:           1.0 / 256,
		CNPInterval: 50 * time.Microsecond,
		AlphaTimer:  55 * time.Microsecond,
		RateTimer:   55 * time.Microsecond,
		ByteCounter: 10 << 20,
		F:           5,
		// R_AI = 40 Mb/s (Zhu et al. 2015, §5); R_HAI = 10 x R_AI, QCN's
		// ratio of hyper to additive increase.
		RAI:  40_000_000,
		RHAI: 400_000_000,
		// 10 Mb/s: a floor so a flow never stops; far below any share.
		MinRate: 10_000_000,
		// 2: the window is only a safety bound for a rate-based
		// controller (it limits what a stale rate can put in flight);
		// twice the rate's BDP never binds while RTT is below 2x srtt.
		WindowRTTs: 2,
	},
}

// bdp is the bandwidth-delay product at rate bits/s and rtt, in bytes.
func bdp(rate uint64, rtt time.Duration) float64 {
	return float64(rate) / 8 * rtt.Seconds()
}

// Validate returns cfg with defaults filled in, or an error naming the
// first nonsensical field. Derived defaults:
//   - InitialWindow: one BDP at LineRate x BaseRTT (a flow may start at
//     line rate, as RDMA NICs do: the delay and ECN loops cut it within
//     an RTT), or 10 MSS (RFC 6928) when the line rate is unknown;
//   - MaxWindow: 4 BDP (room for the queue target and RTT inflation
//     without ever limiting a lone flow), at least InitialWindow, or
//     1 MiB when the line rate is unknown;
//   - MinWindow: MSS/100: Swift lets the window fall to a small fraction
//     of a packet; 1/100 keeps a flow's packet interval within 100 base
//     RTTs (1 ms at 10 us; PacingRate), so even a 1000:1 incast settles
//     and every flow still probes the path.
func (c Config) Validate() (Config, error) {
	d := Defaults
	defInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defF := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	defD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	defU := func(p *uint64, v uint64) {
		if *p == 0 {
			*p = v
		}
	}
	if c.MSS < 0 || c.InitialWindow < 0 || c.MaxWindow < 0 || c.MinWindow < 0 || c.BaseRTT < 0 || c.PacingGain < 0 {
		return c, errors.New("negative window, MSS, base RTT or pacing gain")
	}
	defInt(&c.MSS, d.MSS)
	defD(&c.BaseRTT, d.BaseRTT)
	defF(&c.PacingGain, d.PacingGain)
	if c.InitialWindow == 0 {
		c.InitialWindow = 10 * c.MSS
		if c.LineRate > 0 {
			c.InitialWindow = max(c.MSS, int(bdp(c.LineRate, c.BaseRTT)))
		}
	}
	if c.MaxWindow == 0 {
		c.MaxWindow = 1 << 20
		if c.LineRate > 0 {
			c.MaxWindow = max(4*int(bdp(c.LineRate, c.BaseRTT)), 4*c.MSS)
		}
		c.MaxWindow = max(c.MaxWindow, c.InitialWindow)
	}
	defF(&c.MinWindow, float64(c.MSS)/100)

	m := &c.Metaroce
	defD(&m.TargetQueue, d.Metaroce.TargetQueue)
	defF(&m.AI, d.Metaroce.AI)
	defF(&m.Beta, d.Metaroce.Beta)
	defF(&m.MaxMD, d.Metaroce.MaxMD)
	defF(&m.G, d.Metaroce.G)
	defD(&m.FlowScaleRange, d.Metaroce.FlowScaleRange)
	if m.FlowScaleRange < 0 {
		m.FlowScaleRange = 0
	}

	h := &c.Hint
	defF(&h.WindowGain, d.Hint.WindowGain)
	defF(&h.LifetimeRTTs, d.Hint.LifetimeRTTs)

	q := &c.DCQCN
	defF(&q.G, d.DCQCN.G)
	defD(&q.CNPInterval, d.DCQCN.CNPInterval)
	defD(&q.AlphaTimer, d.DCQCN.AlphaTimer)
	defD(&q.RateTimer, d.DCQCN.RateTimer)
	defInt(&q.ByteCounter, d.DCQCN.ByteCounter)
	defInt(&q.F, d.DCQCN.F)
	defU(&q.RAI, d.DCQCN.RAI)
	defU(&q.RHAI, d.DCQCN.RHAI)
	defU(&q.MinRate, d.DCQCN.MinRate)
	defF(&q.WindowRTTs, d.DCQCN.WindowRTTs)

	var bad []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	check(c.MSS >= 64, "mss %d: want at least 64 bytes", c.MSS)
	check(c.InitialWindow <= c.MaxWindow, "initial window %d above max window %d", c.InitialWindow, c.MaxWindow)
	check(c.MaxWindow >= c.MSS, "max window %d below one mss (%d)", c.MaxWindow, c.MSS)
	check(c.MinWindow <= float64(c.MSS), "min window %.0f above one mss (%d)", c.MinWindow, c.MSS)
	check(c.PacingGain >= 1 && c.PacingGain <= 4, "pacing gain %g: want 1..4", c.PacingGain)
	check(m.TargetQueue > 0, "metaroce target queue %v: want > 0", m.TargetQueue)
	check(m.AI > 0, "metaroce ai %g: want > 0", m.AI)
	check(m.Beta > 0 && m.Beta <= 1, "metaroce beta %g: want (0, 1]", m.Beta)
	check(m.MaxMD > 0 && m.MaxMD < 1, "metaroce max md %g: want (0, 1)", m.MaxMD)
	check(m.G > 0 && m.G <= 1, "metaroce g %g: want (0, 1]", m.G)
	check(h.WindowGain >= 1, "hint window gain %g: want >= 1", h.WindowGain)
	check(h.LifetimeRTTs > 0, "hint lifetime %g rtts: want > 0", h.LifetimeRTTs)
	check(q.G > 0 && q.G <= 1, "dcqcn g %g: want (0, 1]", q.G)
	check(q.CNPInterval > 0 && q.AlphaTimer > 0 && q.RateTimer > 0, "dcqcn timers must be positive")
	check(q.ByteCounter > 0 && q.F > 0, "dcqcn byte counter %d and f %d must be positive", q.ByteCounter, q.F)
	check(q.WindowRTTs >= 1, "dcqcn window rtts %g: want >= 1", q.WindowRTTs)
	check(c.LineRate == 0 || q.MinRate <= c.LineRate, "dcqcn min rate %d above line rate %d", q.MinRate, c.LineRate)
	if len(bad) > 0 {
		return c, errors.New(strings.Join(bad, "; "))
	}
	return c, nil
}
