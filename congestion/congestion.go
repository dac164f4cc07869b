package congestion

import (
	"fmt"
	"strings"
	"time"
)

// Time is an instant in nanoseconds on the caller's clock (monotonic, or a
// simulator's virtual clock). Controllers only compare and subtract it; it
// is an alias so transport.Time converts with int64(t).
type Time = int64

// Controller is one connection's congestion controller. All methods are
// called by the connection's owner (one engine goroutine): a Controller is
// not safe for concurrent use and needs no locks. It never reads a clock:
// every call carries now, and timers are evaluated lazily from it.
type Controller interface {
	// OnSent records bytes of payload handed to the wire at now.
	OnSent(now Time, bytes int)
	// OnAck is the fast loop: called once per ack (or per batch of acks
	// processed together) with what the ack newly acknowledged.
	OnAck(now Time, s AckSample)
	// OnLoss records bytes declared lost (by SACK holes, RACK or a path
	// timeout; not the RTO, which is OnTimeout).
	OnLoss(now Time, bytes int)
	// OnTimeout records a retransmission timeout: nothing came back for
	// an RTO, so the controller's picture of the path is void.
	OnTimeout(now Time)
	// OnTick is the slow loop: the engine calls it on its periodic tick
	// (every few RTTs). Controllers evaluate their timers lazily on every
	// call, so OnTick is never needed for correctness; it lets an idle
	// connection's state (DCQCN's rate recovery, an expiring hint) move
	// while no acks arrive, so telemetry reads current values.
	OnTick(now Time)
	// Window is how many payload bytes the sender may have in flight.
	// It is never below one MSS, so a packet can always be sent; a
	// controller that wants less than one packet per RTT says so through
	// PacingRate.
	Window() int
	// PacingRate is the rate in bits per second at which the pacer
	// releases payload; 0 means unpaced (send as the window allows).
	PacingRate() uint64
	// State is a snapshot for telemetry.
	State() State
}

// AckSample is what one ack (or batch of acks) tells the controller.
type AckSample struct {
	// Bytes is the payload newly acknowledged by this ack.
	Bytes int
	// RTT is an RTT sample taken from an echoed timestamp; 0 if the ack
	// gave none.
	RTT time.Duration
	// MinRTT is the connection's minimum RTT so far (0 if unknown); the
	// controller also keeps its own minimum of the samples it sees.
	MinRTT time.Duration
	// Marked is how many of Bytes arrived CE-marked.
	Marked int
	// Path is the logical path the acknowledged packets took. The
	// controllers here act on the connection; the path is kept in State
	// for telemetry, and path-level reaction (spray weights) stays in the
	// transport, which sees the same signals first.
	Path int
	// RateHint is the receiver's fair-share hint in bits per second (the
	// wire carries Mb/s; the transport converts); 0 means none.
	RateHint uint64
	// InFlight is the payload bytes still in flight after this ack.
	InFlight int
}

// State is a controller's inspectable state.
type State struct {
	Algorithm  string
	Window     int           // bytes, as Window() returns it
	RawWindow  float64       // bytes, before the one-MSS floor (may be below one packet)
	PacingRate uint64        // bits per second, as PacingRate() returns it
	Rate       uint64        // the algorithm's own rate (DCQCN's current rate, the hint), bits/s
	TargetRate uint64        // DCQCN's target rate, bits/s
	Target     time.Duration // metaroce's target delay
	SRTT       time.Duration // smoothed RTT the controller uses
	MinRTT     time.Duration // its minimum RTT
	Alpha      float64       // DCTCP's or DCQCN's alpha
	Hint       uint64        // the last live receiver hint, bits/s (0 none)

	// The last signals seen.
	LastRTT      time.Duration
	LastMarked   int
	LastPath     int
	LastDecrease Time // when the window or rate was last cut (0 never)

	// Counters since creation.
	Acked, Marked, Lost uint64 // bytes
	Decreases           uint64 // window or rate cuts, of any cause
	Timeouts            uint64
}

// New builds the controller named name from cfg, after validating cfg
// (defaults fill its zero fields). An empty name selects DefaultName.
func New(name string, cfg Config) (Controller, error) {
	if name == "" {
		name = DefaultName
	}
	f, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("congestion: unknown algorithm %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	c, err := cfg.Validate()
	if err != nil {
		return nil, fmt.Errorf("congestion: %s: %w", name, err)
	}
	return f(c), nil
}

// DefaultName is the algorithm New builds for an empty name.
const DefaultName = "metaroce"

type factory func(Config) Controller

// registry lists the algorithms in the order Names reports them. A fixed
// table, not a map, so Names is deterministic and nothing registers at
// init time behind the config's back.
var registry = [...]struct {
	name string
	new  factory
}{
	{"metaroce", func(c Config) Controller { return newMetaroce(c) }},
	{"receiver-hint", func(c Config) Controller { return newHint(c) }},
	{"dcqcn", func(c Config) Controller { return newDCQCN(c) }},
	{"none", func(c Config) Controller { return newNone(c) }},
}

func lookup(name string) (factory, bool) {
	for _, r := range registry {
		if r.name == name {
			return r.new, true
		}
	}
	return nil, false
}

// Names returns the known algorithm names, the default first.
func Names() []string {
	out := make([]string, len(registry))
	for i, r := range registry {
		out[i] = r.name
	}
	return out
}

// Known reports whether name is an algorithm New accepts ("" is: it means
// the default).
func Known(name string) bool {
	if name == "" {
		return true
	}
	_, ok := lookup(name)
	return ok
}
