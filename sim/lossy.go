package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// LossyConfig is the two-host scenario of `metaroce sim -scenario lossy`:
// host A runs Messages operations of Size bytes against host B over a pair
// of impaired links, and every byte is checked at its destination.
type LossyConfig struct {
	Op          string // "write" (WRITE with immediate), "read" or "send"
	Messages    int
	Size        int
	Outstanding int // messages in flight at once
	Streams     int // messages go round-robin over this many streams
	Seed        uint64
	Link        LinkConfig // both directions
	Transport   transport.Config
	// Limit bounds virtual time; a run that has not finished by then
	// reports what it has.
	Limit time.Duration
}

// Result is the scenario report (the JSON of `metaroce sim`).
type Result struct {
	Scenario            string  `json:"scenario"`
	Transport           string  `json:"transport"`
	Op                  string  `json:"op"`
	Seed                uint64  `json:"seed"`
	Messages            int     `json:"messages"`
	Size                int     `json:"size"`
	MessagesCompleted   int     `json:"messages_completed"`
	MessagesLost        int     `json:"messages_lost"`
	MessagesFailed      int     `json:"messages_failed"`
	DuplicatesDelivered int     `json:"duplicates_delivered"`
	CorruptDelivered    int     `json:"corrupt_delivered"`
	BytesVerified       int64   `json:"bytes_verified"`
	PacketsSent         uint64  `json:"packets_sent"`
	PacketsRetransmit   uint64  `json:"packets_retransmitted"`
	RetransmitRatio     float64 `json:"retransmit_ratio"`
	SpuriousRetransmit  uint64  `json:"spurious_retransmissions"`
	Timeouts            uint64  `json:"timeouts"`
	AcksSent            uint64  `json:"acks_sent"`
	NacksSent           uint64  `json:"nacks_sent"`
	WireDropped         uint64  `json:"wire_dropped"`
	WireCorrupted       uint64  `json:"wire_corrupted"`
	CRCDrops            uint64  `json:"crc_drops"`
	Duplicates          uint64  `json:"duplicate_packets_received"`
	GoodputGbps         float64 `json:"goodput_gbps"`
	FCTP50us            float64 `json:"fct_p50_us"`
	FCTP99us            float64 `json:"fct_p99_us"`
	SimTimeus           float64 `json:"sim_time_us"`
	Events              uint64  `json:"events"`
	WallS               float64 `json:"wall_s"`
	Error               string  `json:"error,omitempty"`
}

// DefaultLink is a 100 Gb/s link with 2 us of propagation delay, a
// single-switch-hop datacenter round trip once the far end answers.
var DefaultLink = LinkConfig{RateBps: 100e9, Delay: 2 * time.Microsecond, ReorderDelay: 2 * time.Microsecond}

const service = 1

// RunLossy runs the lossy scenario.
func RunLossy(cfg LossyConfig) (*Result, error) {
	if cfg.Messages <= 0 || cfg.Size < 0 || cfg.Outstanding <= 0 || cfg.Streams <= 0 {
		return nil, errors.New("sim: messages, outstanding and streams must be positive, size non-negative")
	}
	switch cfg.Op {
	case "write", "read", "send":
	default:
		return nil, fmt.Errorf("sim: unknown op %q (want write, read or send)", cfg.Op)
	}
	if cfg.Limit == 0 {
		cfg.Limit = 60 * time.Second
	}
	start := time.Now()
	n := New(cfg.Seed)
	tc := cfg.Transport
	tc.Seed = cfg.Seed*2 + 1
	if tc.MaxStreams < cfg.Streams {
		tc.MaxStreams = cfg.Streams
	}
	if tc.MsgWindow == 0 {
		tc.MsgWindow = max(transport.Defaults.MsgWindow, nextPow2(cfg.Outstanding))
	}
	if tc.RecvQueue == 0 {
		tc.RecvQueue = max(transport.Defaults.RecvQueue, nextPow2(cfg.Outstanding))
	}
	a, err := n.AddHost(netip.MustParseAddr("10.0.0.1"), tc, cfg.Link.RateBps)
	if err != nil {
		return nil, err
	}
	tc.Seed = cfg.Seed*2 + 2
	b, err := n.AddHost(netip.MustParseAddr("10.0.0.2"), tc, cfg.Link.RateBps)
	if err != nil {
		return nil, err
	}
	// The NIC serialises at the link rate; the wire itself adds only
	// delay and impairments.
	wireCfg := cfg.Link
	wireCfg.RateBps = 0
	ab, ba := n.Connect(a, b, wireCfg), n.Connect(b, a, wireCfg)

	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	slots := cfg.Outstanding
	// A's buffers and B's region: slot s of each is used by one message
	// at a time.
	aBuf := make([]byte, slots*cfg.Size)
	bBuf := make([]byte, slots*cfg.Size)
	const regionBase = 0x7f0000000000
	key := rng.Uint32() | 1
	memB := transport.NewMemoryTable()
	memB.Add(&transport.Region{Key: key, Addr: regionBase, Buf: bBuf,
		Access: transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessLocalWrite})
	b.EP.Listen(service, memB)

	res := &Result{Scenario: "lossy", Transport: string(tcMode(cfg.Transport)), Op: cfg.Op, Seed: cfg.Seed,
		Messages: cfg.Messages, Size: cfg.Size}
	var (
		conn       *transport.Conn
		next       int // next message to post
		postedAt   = make([]Time, cfg.Messages)
		slotOf     = make([]int, cfg.Messages)
		expect     = make([][]byte, slots) // expected content of each slot's message
		msgOfSlot  = make([]int, slots)
		senderDone = make([]bool, cfg.Messages)
		recvSeen   = make([]int, cfg.Messages)
		fct        = make([]float64, 0, cfg.Messages)
		failed     error
	)
	for s := range expect {
		expect[s] = make([]byte, cfg.Size)
	}
	slice := func(buf []byte, s int) []byte { return buf[s*cfg.Size : (s+1)*cfg.Size] }
	fill := func(p []byte) {
		for i := 0; i+8 <= len(p); i += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				p[i+k] = byte(v >> (8 * k))
			}
		}
		for i := len(p) &^ 7; i < len(p); i++ {
			p[i] = byte(rng.Uint32())
		}
	}
	post := func(now Time, s int) {
		if next >= cfg.Messages || conn == nil {
			return
		}
		i := next
		next++
		slotOf[i], msgOfSlot[s] = s, i
		postedAt[i] = now
		wr := &transport.WorkRequest{WRID: uint64(i), Stream: uint16(i % cfg.Streams),
			RemoteAddr: regionBase + uint64(s*cfg.Size), RKey: key, Imm: uint32(i), HasImm: true}
		var err error
		switch cfg.Op {
		case "write":
			fill(slice(aBuf, s))
			copy(expect[s], slice(aBuf, s))
			wr.Local = slice(aBuf, s)
			err = conn.PostWrite(wr)
		case "read":
			fill(slice(bBuf, s))
			copy(expect[s], slice(bBuf, s))
			clear(slice(aBuf, s))
			wr.Local = slice(aBuf, s)
			wr.HasImm = false
			err = conn.PostRead(wr)
		case "send":
			fill(slice(aBuf, s))
			copy(expect[s], slice(aBuf, s))
			wr.Local = slice(aBuf, s)
			err = conn.PostSend(wr)
		}
		if err != nil && failed == nil {
			failed = fmt.Errorf("post message %d: %w", i, err)
		}
	}
	verify := func(i int, got []byte) {
		if bytes.Equal(got, expect[slotOf[i]]) {
			res.BytesVerified += int64(len(got))
		} else {
			res.CorruptDelivered++
		}
	}
	finished := func(i int) bool {
		return senderDone[i] && (cfg.Op == "read" || recvSeen[i] > 0)
	}
	completed := 0
	maybeNext := func(now Time, i int) {
		if finished(i) {
			completed++
			post(now, slotOf[i])
		}
	}
	a.OnCompletion = func(now Time, c transport.Completion) {
		switch c.Op {
		case transport.OpConnected:
			conn = c.Conn
			for s := 0; s < slots; s++ {
				post(now, s)
			}
		case transport.OpClosed:
			if failed == nil {
				failed = fmt.Errorf("connection closed: %v (%v)", c.Status, c.Conn.Err)
			}
		case transport.OpWrite, transport.OpRead, transport.OpSend:
			i := int(c.WRID)
			if c.Status != transport.StatusOK {
				res.MessagesFailed++
				return
			}
			if senderDone[i] {
				res.DuplicatesDelivered++
				return
			}
			senderDone[i] = true
			fct = append(fct, float64(now-postedAt[i])/1e3)
			switch cfg.Op {
			case "write":
				verify(i, slice(bBuf, slotOf[i]))
			case "read":
				verify(i, slice(aBuf, slotOf[i]))
			}
			maybeNext(now, i)
		}
	}
	b.OnCompletion = func(now Time, c transport.Completion) {
		switch c.Op {
		case transport.OpConnected:
			if cfg.Op == "send" {
				for s := 0; s < slots; s++ {
					if err := c.Conn.PostRecv(uint64(s), slice(bBuf, s)); err != nil && failed == nil {
						failed = err
					}
				}
			}
		case transport.OpRecvWriteImm, transport.OpRecv:
			if c.Status != transport.StatusOK {
				res.MessagesFailed++
				return
			}
			i := int(c.Imm)
			if i < 0 || i >= cfg.Messages {
				res.CorruptDelivered++
				return
			}
			recvSeen[i]++
			if recvSeen[i] > 1 {
				res.DuplicatesDelivered++
				return
			}
			if cfg.Op == "send" {
				s := int(c.WRID)
				if c.Bytes != cfg.Size {
					res.CorruptDelivered++
				} else {
					verify(i, slice(bBuf, s))
				}
				if err := c.Conn.PostRecv(uint64(s), slice(bBuf, s)); err != nil && failed == nil {
					failed = err
				}
			}
			maybeNext(now, i)
		}
	}
	if _, err := a.EP.Connect(0, b.Addr, service, transport.NewMemoryTable()); err != nil {
		return nil, err
	}
	a.Kick()
	n.Run(Time(cfg.Limit), func() bool { return completed == cfg.Messages || failed != nil })

	res.MessagesCompleted = completed
	res.MessagesLost = cfg.Messages - completed - res.MessagesFailed
	for _, h := range []*Host{a, b} {
		st := h.EP.Stats()
		res.PacketsSent += st.DataSent
		res.PacketsRetransmit += st.DataRetransmitted
		res.SpuriousRetransmit += st.SpuriousRetx
		res.Timeouts += st.Timeouts
		res.AcksSent += st.AcksSent
		for _, v := range st.NacksSent {
			res.NacksSent += v
		}
		res.CRCDrops += st.RxMalformed[wire.ErrCRC.Reason()]
		res.Duplicates += st.Duplicates
	}
	for _, l := range []*Link{ab, ba} {
		res.WireDropped += l.Stats.Dropped
		res.WireCorrupted += l.Stats.Corrupted
	}
	if first := res.PacketsSent - res.PacketsRetransmit; first > 0 {
		res.RetransmitRatio = float64(res.PacketsRetransmit) / float64(first)
	}
	res.SimTimeus = float64(n.Now()) / 1e3
	if n.Now() > 0 {
		res.GoodputGbps = float64(res.BytesVerified*8) / float64(n.Now())
	}
	slices.Sort(fct)
	res.FCTP50us = percentile(fct, 0.50)
	res.FCTP99us = percentile(fct, 0.99)
	res.Events = n.Events
	res.WallS = time.Since(start).Seconds()
	if failed != nil {
		res.Error = failed.Error()
	} else if completed < cfg.Messages {
		res.Error = fmt.Sprintf("time limit %v reached with %d of %d messages complete", cfg.Limit, completed, cfg.Messages)
	}
	return res, nil
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func nextPow2(v int) int {
	n := 1
	for n < v {
		n <<= 1
	}
	return n
}
