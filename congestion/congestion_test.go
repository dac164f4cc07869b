package congestion

import (
	"math"
	"strings"
	"testing"
	"time"
)

// sender is a scenario helper: one controller on a mock clock.
type sender struct {
	t   *testing.T
	cc  Controller
	now Time
	cfg Config
}

func newSender(t *testing.T, name string, tweak ...func(*Config)) *sender {
	t.Helper()
	cfg := Config{MSS: 4096, LineRate: 100e9, BaseRTT: 10 * us}
	for _, f := range tweak {
		f(&cfg)
	}
	cc, err := New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := cfg.Validate()
	return &sender{t: t, cc: cc, cfg: full}
}

func (s *sender) wait(d time.Duration) { s.now += int64(d) }

// acks delivers n acks of one MSS each, every `every`, all with RTT rtt,
// the first `marked` of every ack's bytes CE-marked, the window kept full.
func (s *sender) acks(n int, every, rtt time.Duration, marked int) {
	for i := 0; i < n; i++ {
		s.wait(every)
		s.cc.OnSent(s.now, s.cfg.MSS)
		s.cc.OnAck(s.now, AckSample{Bytes: s.cfg.MSS, RTT: rtt, Marked: marked, InFlight: s.cc.Window()})
	}
}

// hinted delivers n acks like acks, each carrying hint.
func (s *sender) hinted(n int, every, rtt time.Duration, hint uint64) {
	for i := 0; i < n; i++ {
		s.wait(every)
		s.cc.OnAck(s.now, AckSample{Bytes: s.cfg.MSS, RTT: rtt, RateHint: hint, InFlight: s.cc.Window()})
	}
}

func (s *sender) window() int       { return s.cc.Window() }
func (s *sender) state() State      { return s.cc.State() }
func (s *sender) rate() uint64      { return s.cc.PacingRate() }
func (s *sender) decreases() uint64 { return s.cc.State().Decreases }

func TestFactoryNames(t *testing.T) {
	want := []string{"metaroce", "receiver-hint", "dcqcn", "none"}
	if got := Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, n := range want {
		if !Known(n) {
			t.Errorf("Known(%q) = false", n)
		}
		cc, err := New(n, Config{})
		if err != nil {
			t.Fatalf("New(%q): %v", n, err)
		}
		if a := cc.State().Algorithm; a != n {
			t.Errorf("New(%q) built %q", n, a)
		}
	}
	cc, err := New("", Config{})
	if err != nil || cc.State().Algorithm != DefaultName {
		t.Errorf("New(\"\") = %v, %v; want the default", cc, err)
	}
}

func TestFactoryRejectsUnknown(t *testing.T) {
	for _, n := range []string{"cubic", "MetaRoCE", "dcqcn "} {
		if Known(n) {
			t.Errorf("Known(%q) = true", n)
		}
		_, err := New(n, Config{})
		if err == nil {
			t.Fatalf("New(%q) succeeded", n)
		}
		msg := err.Error()
		if !strings.Contains(msg, `unknown algorithm "`+n+`"`) || !strings.Contains(msg, "metaroce, receiver-hint, dcqcn, none") {
			t.Errorf("New(%q): %q does not name the algorithm and the known ones", n, msg)
		}
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	c, err := Config{LineRate: 100e9, BaseRTT: 10 * us, MSS: 4096}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if c.InitialWindow != 125000 || c.MaxWindow != 500000 {
		t.Errorf("derived windows %d / %d, want one and four BDP (125000 / 500000)", c.InitialWindow, c.MaxWindow)
	}
	if c.Metaroce.G != 1.0/16 || c.DCQCN.G != 1.0/256 || c.PacingGain != 1.2 {
		t.Errorf("defaults not filled: %+v", c)
	}
	c, _ = Config{}.Validate()
	if c.InitialWindow != 10*c.MSS || c.MaxWindow != 1<<20 {
		t.Errorf("windows without a line rate: %d / %d", c.InitialWindow, c.MaxWindow)
	}
	bad := []Config{
		{MSS: -1},
		{MSS: 10},
		{InitialWindow: 1 << 21, MaxWindow: 1 << 20},
		{PacingGain: 0.5},
		{Metaroce: MetaroceConfig{Beta: 2}},
		{Metaroce: MetaroceConfig{MaxMD: 1}},
		{MinWindow: 1e6},
		{LineRate: 1e6}, // below DCQCN's min rate
	}
	for _, b := range bad {
		if _, err := b.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", b)
		} else if _, err := New("metaroce", b); err == nil || !strings.HasPrefix(err.Error(), "congestion: metaroce: ") {
			t.Errorf("New with %+v: %v, want a wrapped error", b, err)
		}
	}
}

// chaos drives cc with a seeded mix of every signal.
func chaos(s *sender, n int) {
	rng := uint64(12345)
	next := func(k uint64) uint64 {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return rng % k
	}
	for i := 0; i < n; i++ {
		s.wait(time.Duration(next(20000)))
		switch next(20) {
		case 0:
			s.cc.OnLoss(s.now, int(next(100000)))
		case 1:
			s.cc.OnTimeout(s.now)
		case 2:
			s.cc.OnTick(s.now)
		default:
			b := int(next(64 << 10))
			s.cc.OnSent(s.now, b)
			s.cc.OnAck(s.now, AckSample{Bytes: b, RTT: time.Duration(next(uint64(2 * ms))), Marked: int(next(uint64(b + 1))),
				RateHint: next(2) * next(200e9), InFlight: int(next(1 << 20)), Path: int(next(256))})
		}
		w, r := s.window(), s.rate()
		if w < s.cfg.MSS || w > s.cfg.MaxWindow {
			s.t.Fatalf("step %d: window %d outside [%d, %d]", i, w, s.cfg.MSS, s.cfg.MaxWindow)
		}
		if r > s.cfg.LineRate {
			s.t.Fatalf("step %d: pacing rate %d above line rate %d", i, r, s.cfg.LineRate)
		}
		if st := s.state(); st.RawWindow < s.cfg.MinWindow-1e-9 || math.IsNaN(st.RawWindow) {
			s.t.Fatalf("step %d: raw window %g below the floor %g", i, st.RawWindow, s.cfg.MinWindow)
		}
	}
}

func TestWindowStaysBetweenFloorAndCap(t *testing.T) {
	for _, n := range Names() {
		t.Run(n, func(t *testing.T) { chaos(newSender(t, n), 20000) })
	}
}

func TestMetaroceGrowsToCapWhenUncongested(t *testing.T) {
	s := newSender(t, "metaroce")
	s.acks(20000, 100*time.Nanosecond, 10*us, 0)
	if w := s.window(); w != s.cfg.MaxWindow {
		t.Errorf("window %d after 20000 clean acks, want the cap %d", w, s.cfg.MaxWindow)
	}
}

func TestMetaroceCollapsesToFloorUnderHeavyDelay(t *testing.T) {
	s := newSender(t, "metaroce")
	s.acks(5000, 1*us, 200*us, 0)
	if w, raw := s.window(), s.state().RawWindow; w != s.cfg.MSS || raw > s.cfg.MinWindow*1.01 {
		t.Errorf("window %d (raw %.0f) under 200 us RTTs, want the floor %d (raw %.0f)", w, raw, s.cfg.MSS, s.cfg.MinWindow)
	}
}

func TestMetaroceCutsAtMostOncePerRTT(t *testing.T) {
	for _, sig := range []struct {
		name   string
		rtt    time.Duration
		marked int
	}{{"delay", 30 * us, 0}, {"ecn", 10 * us, 4096}, {"both", 30 * us, 4096}} {
		s := newSender(t, "metaroce")
		// Every ack of 1 ms, one per 100 ns, reports congestion.
		s.acks(10000, 100*time.Nanosecond, sig.rtt, sig.marked)
		srtt := s.state().SRTT
		if d, most := s.decreases(), uint64(ms/srtt)+1; d > most || d == 0 {
			t.Errorf("%s: %d cuts in 1 ms at srtt %v, want 1..%d", sig.name, d, srtt, most)
		}
	}
	// Losses beside a delay signal too.
	s := newSender(t, "metaroce")
	s.acks(1, 100*time.Nanosecond, 30*us, 0)
	for i := 0; i < 1000; i++ {
		s.wait(100 * time.Nanosecond)
		s.cc.OnLoss(s.now, 4096)
	}
	srtt := s.state().SRTT
	if d, most := s.decreases(), uint64(100*us/srtt)+1; d == 0 || d > most {
		t.Errorf("%d cuts for 100 us of congestive losses at srtt %v, want 1..%d", d, srtt, most)
	}
}

func TestMetaroceIgnoresLossWithoutCongestion(t *testing.T) {
	// Losses while RTTs sit at the base and nothing is marked are not
	// the queue's doing (corruption, a bad path): no cut.
	s := newSender(t, "metaroce")
	w := s.cc.Window()
	for i := 0; i < 1000; i++ {
		s.acks(1, 100*time.Nanosecond, 10*us, 0)
		s.cc.OnLoss(s.now, 4096)
	}
	if d := s.decreases(); d != 0 || s.cc.Window() < w {
		t.Errorf("%d cuts, window %d from %d, for losses at the base RTT without marks", d, s.cc.Window(), w)
	}
	// The same losses with marks do cut.
	s.acks(200, 100*time.Nanosecond, 10*us, 4096)
	before := s.decreases()
	s.cc.OnLoss(s.now, 4096)
	s.wait(50 * us)
	s.cc.OnLoss(s.now, 4096)
	if s.decreases() == before {
		t.Error("losses beside CE marks did not cut")
	}
}

func TestMetaroceDelayCutIsProportional(t *testing.T) {
	// One RTT (20 us, the srtt) of samples at 20 us against a 10 + 5 us
	// (+ flow scaling) target cuts by about 0.8 x (20 - target) / 20.
	s := newSender(t, "metaroce")
	w0 := s.state().RawWindow
	s.acks(201, 100*time.Nanosecond, 20*us, 0)
	st := s.state()
	want := w0 * (1 - 0.8*float64(20*us-st.Target)/float64(20*us))
	if st.Decreases != 1 || math.Abs(st.RawWindow-want)/want > 0.02 {
		t.Errorf("window %.0f after %d cut(s), want one cut to ~%.0f (target %v)", st.RawWindow, st.Decreases, want, st.Target)
	}
}

func TestMetaroceTimeoutCollapsesWindow(t *testing.T) {
	s := newSender(t, "metaroce")
	s.acks(2000, 100*time.Nanosecond, 10*us, 0)
	before := s.window()
	s.cc.OnTimeout(s.now)
	if w := s.window(); w != s.cfg.MSS {
		t.Fatalf("window %d after a timeout, want one MSS (%d)", w, s.cfg.MSS)
	}
	// Slow start back towards half the old window, then AI.
	s.acks(100, 100*time.Nanosecond, 10*us, 0)
	if w := s.window(); w < before/2 {
		t.Errorf("window %d after 100 clean acks, want slow start back to %d", w, before/2)
	}
}

func TestMetarocePacingFollowsWindow(t *testing.T) {
	s := newSender(t, "metaroce", func(c *Config) { c.LineRate = 0 })
	s.acks(50, 1*us, 10*us, 0)
	st := s.state()
	want := 1.2 * float64(st.RawWindow) * 8 / st.SRTT.Seconds()
	if r := float64(s.rate()); math.Abs(r-want)/want > 0.001 {
		t.Errorf("pacing %.3g b/s, want 1.2 x window / srtt = %.3g", r, want)
	}
	// Below one MSS the rate is window / srtt, under one packet per RTT,
	// but a packet at least every MSS / MinWindow base RTTs: here the
	// window sits at MinWindow with an RTT of 10 base RTTs, so the floor
	// rules.
	s.acks(3000, 1*us, 100*us, 0)
	st = s.state()
	if st.RawWindow >= float64(s.cfg.MSS) {
		t.Fatalf("window %.0f not below one MSS", st.RawWindow)
	}
	byWindow := st.RawWindow * 8 / st.SRTT.Seconds()
	floor := s.cfg.MinWindow * 8 / s.cfg.BaseRTT.Seconds()
	if floor <= byWindow {
		t.Fatalf("floor %.3g b/s not above window / srtt %.3g: the case does not test it", floor, byWindow)
	}
	if r := float64(s.rate()); math.Abs(r-floor)/floor > 0.01 || s.window() != s.cfg.MSS {
		t.Errorf("sub-packet: pacing %.3g b/s window %d, want the floor %.3g b/s (window / srtt %.3g) and one MSS", r, s.window(), floor, byWindow)
	}
	// Above the floor, window / srtt: an RTT near the base one.
	s.acks(3000, 1*us, 12*us, 0)
	st = s.state()
	if st.RawWindow < float64(s.cfg.MSS) {
		want = max(st.RawWindow*8/st.SRTT.Seconds(), floor)
		if r := float64(s.rate()); math.Abs(r-want)/want > 0.01 {
			t.Errorf("sub-packet near base RTT: pacing %.3g b/s, want %.3g", r, want)
		}
	}
}

func TestMetaroceHintCapsPacing(t *testing.T) {
	s := newSender(t, "metaroce")
	s.hinted(100, 1*us, 10*us, 5e9)
	if r := s.rate(); r != 5e9 {
		t.Errorf("pacing %d with a 5 Gb/s hint, want 5e9", r)
	}
	// Without hints for more than 4 srtt, the cap lapses.
	s.acks(100, 1*us, 10*us, 0)
	if r := s.rate(); r <= 5e9 {
		t.Errorf("pacing %d after the hint expired, want above it", r)
	}
}

func TestReceiverHintFollowsHintThenFallsBack(t *testing.T) {
	s := newSender(t, "receiver-hint")
	s.hinted(20, 1*us, 10*us, 8e9)
	wantW := int(8e9 / 8 * 10e-6 * 1.25)
	if r, w := s.rate(), s.window(); r != 8e9 || w != wantW {
		t.Errorf("rate %d window %d, want the hint 8e9 and hint x srtt x 1.25 = %d", r, w, wantW)
	}
	// A lower hint is followed within one ack: no per-RTT limit.
	s.hinted(1, 1*us, 10*us, 4e9)
	if r := s.rate(); r != 4e9 {
		t.Errorf("rate %d one ack after a 4 Gb/s hint", r)
	}
	// Above target the hinted rate is scaled by target / RTT.
	s.hinted(1, 1*us, 30*us, 4e9)
	if r, tg := s.rate(), s.state().Target; math.Abs(float64(r)-4e9*float64(tg)/float64(30*us)) > 1e6 {
		t.Errorf("rate %d at 30 us RTT, want 4e9 x %v / 30us", r, tg)
	}
	// Hints stop: after 4 srtt the controller is metaroce again, from the
	// hint's window.
	w := s.window()
	s.wait(100 * us)
	s.cc.OnTick(s.now)
	st := s.state()
	if st.Hint != 0 || math.Abs(float64(s.window()-w)) > float64(s.cfg.MSS) {
		t.Errorf("after the hint lapsed: hint %d window %d, want 0 and about %d", st.Hint, s.window(), w)
	}
	want := 1.2 * st.RawWindow * 8 / st.SRTT.Seconds()
	if r := float64(s.rate()); math.Abs(r-want)/want > 0.001 {
		t.Errorf("fallback pacing %.3g, want metaroce's %.3g", r, want)
	}
}

func TestNoneIsFixed(t *testing.T) {
	s := newSender(t, "none")
	s.acks(100, 1*us, 500*us, 4096)
	s.cc.OnTimeout(s.now)
	if s.window() != s.cfg.MaxWindow || s.rate() != 0 {
		t.Errorf("none: window %d rate %d, want %d and unpaced", s.window(), s.rate(), s.cfg.MaxWindow)
	}
}

func TestDCQCNCutsOncePerCNPInterval(t *testing.T) {
	s := newSender(t, "dcqcn")
	if r := s.rate(); r != 100e9 {
		t.Fatalf("dcqcn starts at %d, want line rate", r)
	}
	s.acks(1, 1*us, 10*us, 100) // first CNP: alpha = 1 halves
	st := s.state()
	if st.Rate != 50e9 || st.TargetRate != 100e9 || math.Abs(st.Alpha-(1-1.0/256+1.0/256)) > 1e-9 {
		t.Errorf("after one CNP: rate %d target %d alpha %g", st.Rate, st.TargetRate, st.Alpha)
	}
	// Marks for the next 49 us are within the CNP interval.
	s.acks(49, 1*us, 10*us, 100)
	if d := s.decreases(); d != 1 {
		t.Errorf("%d cuts within one 50 us CNP interval", d)
	}
	s.acks(1, 1*us, 10*us, 100)
	if d := s.decreases(); d != 2 {
		t.Errorf("%d cuts after 50 us, want 2", d)
	}
	if w, want := s.window(), int(float64(s.state().Rate)/8*s.state().SRTT.Seconds()*2); w != want {
		t.Errorf("window %d, want rate x srtt x 2 = %d", w, want)
	}
}

func TestDCQCNRecoversByStages(t *testing.T) {
	s := newSender(t, "dcqcn")
	s.acks(1, 1*us, 10*us, 100) // 100 -> 50 Gb/s, target 100
	// Fast recovery: each 55 us timer halves the distance to the target.
	s.wait(55 * us)
	s.cc.OnTick(s.now)
	if r := s.state().Rate; r != 75e9 {
		t.Errorf("after one timer: %d, want 75e9", r)
	}
	s.wait(4 * 55 * us)
	s.cc.OnTick(s.now)
	if r := s.state().Rate; r != uint64(100e9-50e9/32) {
		t.Errorf("after five timers: %d, want %d", r, uint64(100e9-50e9/32))
	}
	// Alpha decayed once per 55 us without a CNP.
	if a, want := s.state().Alpha, math.Pow(1-1.0/256, 5); math.Abs(a-want) > 1e-9 {
		t.Errorf("alpha %g, want %g", a, want)
	}
	// Later stages take it back to line rate.
	s.wait(10 * ms)
	s.cc.OnTick(s.now)
	if r := s.state().Rate; r != 100e9 {
		t.Errorf("after 10 ms: %d, want line rate", r)
	}
}

// Lazy timers: evaluating them at every call or only when the next call
// comes gives the same state.
func TestDCQCNTimersAreLazy(t *testing.T) {
	a, b := newSender(t, "dcqcn"), newSender(t, "dcqcn")
	a.acks(1, 1*us, 10*us, 100)
	b.acks(1, 1*us, 10*us, 100)
	for i := 0; i < 400; i++ {
		a.wait(1 * us)
		a.cc.OnTick(a.now)
	}
	b.wait(400 * us)
	a.acks(1, 1*us, 10*us, 0)
	b.acks(1, 1*us, 10*us, 0)
	if sa, sb := a.state(), b.state(); sa.Rate != sb.Rate || sa.TargetRate != sb.TargetRate || sa.Alpha != sb.Alpha {
		t.Errorf("ticked %d/%d/%g, lazy %d/%d/%g", sa.Rate, sa.TargetRate, sa.Alpha, sb.Rate, sb.TargetRate, sb.Alpha)
	}
}

func TestDCQCNByteCounterDrivesIncrease(t *testing.T) {
	s := newSender(t, "dcqcn", func(c *Config) { c.DCQCN.ByteCounter = 64 << 10 })
	s.acks(1, 1*us, 10*us, 100)
	s.cc.OnSent(s.now, 64<<10) // one byte-counter event, no timer
	if r := s.state().Rate; r != 75e9 {
		t.Errorf("after one byte-counter event: %d, want 75e9", r)
	}
}
