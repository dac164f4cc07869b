package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
)

func runCC(t *testing.T, cfg CCConfig) *CCResult {
	t.Helper()
	r, err := RunCC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != "" {
		t.Fatalf("%s/%s: %s", cfg.Scenario, cfg.CC, r.Error)
	}
	if r.MessagesLost != 0 || r.MessagesFailed != 0 {
		t.Fatalf("%s/%s: %d lost, %d failed", cfg.Scenario, r.CC, r.MessagesLost, r.MessagesFailed)
	}
	return r
}

// ccTrio runs a scenario with the default controller, dcqcn and none.
func ccTrio(t *testing.T, cfg CCConfig) (def, dcqcn, none *CCResult) {
	cfg.CC = ""
	def = runCC(t, cfg)
	if def.CC != "metaroce" {
		t.Fatalf("default controller %q, want metaroce", def.CC)
	}
	cfg.CC = "dcqcn"
	dcqcn = runCC(t, cfg)
	cfg.CC = "none"
	none = runCC(t, cfg)
	return
}

// TestIncast32 is issue 4's incast acceptance: 32 senders write 256 KiB
// each to one receiver at once. The default needs no retransmission
// timeout, completes within 1.2x of ideal at p99 and never fills the
// 1 MiB port buffer (its peak is the senders' initial windows, 32 x
// 16 KiB, before any feedback); dcqcn and none do worse on each figure.
func TestIncast32(t *testing.T) {
	cfg := CCConfig{Scenario: "incast", Senders: 32, Seed: 1}
	m, d, n := ccTrio(t, cfg)
	if m.Timeouts != 0 || m.QueueDrops != 0 {
		t.Errorf("metaroce: %d timeouts, %d tail drops", m.Timeouts, m.QueueDrops)
	}
	if m.P99OverIdeal > 1.2 {
		t.Errorf("metaroce: p99 %.1f us is %.2fx the ideal %.1f us", m.FCTP99us, m.P99OverIdeal, m.IdealFCTus)
	}
	if limit := 32*16<<10 + 32*1500; m.QueueMaxBytes > limit {
		t.Errorf("metaroce: queue peaked at %d bytes, above the initial windows' %d", m.QueueMaxBytes, limit)
	}
	for _, o := range []*CCResult{d, n} {
		if o.P99OverIdeal <= m.P99OverIdeal || o.QueueP99Bytes <= m.QueueP99Bytes || o.Timeouts < m.Timeouts {
			t.Errorf("%s (p99 %.2fx, queue p99 %d, %d timeouts) not worse than metaroce (%.2fx, %d, %d)",
				o.CC, o.P99OverIdeal, o.QueueP99Bytes, o.Timeouts, m.P99OverIdeal, m.QueueP99Bytes, m.Timeouts)
		}
	}
}

// TestFairnessJoins is the fairness acceptance: four flows join one
// bottleneck 500 us (60 base RTTs) apart. After each join, the default
// reaches a Jain index of 0.95 within 40 base RTTs and keeps it (every
// window from 40 RTTs after the join); dcqcn does not converge, and none
// is fair only by filling the buffer.
func TestFairnessJoins(t *testing.T) {
	m, d, n := ccTrio(t, CCConfig{Scenario: "fairness", Senders: 4, Seed: 1})
	for k, c := range m.ConvergeRTTs {
		if c < 0 || c > 40 {
			t.Errorf("metaroce: flow %d joined and Jain reached 0.95 after %v RTTs, want <= 40", k+2, c)
		}
	}
	if m.JainMin < 0.95 {
		t.Errorf("metaroce: worst settled window has Jain %.4f", m.JainMin)
	}
	if d.JainFairness >= m.JainFairness {
		t.Errorf("dcqcn Jain %.4f not below metaroce's %.4f", d.JainFairness, m.JainFairness)
	}
	if n.JainFairness > m.JainFairness || n.QueueP99Bytes < 10*m.QueueP99Bytes {
		t.Errorf("none (Jain %.4f, queue p99 %d) against metaroce (%.4f, %d)", n.JainFairness, n.QueueP99Bytes,
			m.JainFairness, m.QueueP99Bytes)
	}
}

// TestMixedShortMessages is the mixed acceptance: four long flows and
// a stream of 4 KiB messages share one port. With the default the short
// messages' p99 stays within 1.5x of their unloaded completion time
// (one base RTT plus serialisation) while the port stays over 90% busy;
// dcqcn leaves the port mostly idle and none queues the short messages
// behind a full buffer.
func TestMixedShortMessages(t *testing.T) {
	m, d, n := ccTrio(t, CCConfig{Scenario: "mixed", Senders: 4, Seed: 1})
	short := func(r *CCResult) ClassFCT {
		for _, c := range r.Classes {
			if c.Class == "short" {
				return c
			}
		}
		t.Fatalf("%s: no short class", r.CC)
		return ClassFCT{}
	}
	if s := short(m); s.P99OverIdeal > 1.5 || s.Messages < 50 {
		t.Errorf("metaroce: %d short messages, p99 %.1f us = %.2fx ideal", s.Messages, s.FCTP99us, s.P99OverIdeal)
	}
	if m.Utilisation < 0.9 {
		t.Errorf("metaroce: port %.1f%% busy", 100*m.Utilisation)
	}
	if d.Utilisation >= 0.9 && short(d).P99OverIdeal <= short(m).P99OverIdeal {
		t.Errorf("dcqcn: %.1f%% busy with short p99 %.2fx: not worse than metaroce", 100*d.Utilisation, short(d).P99OverIdeal)
	}
	if short(n).P99OverIdeal <= short(m).P99OverIdeal {
		t.Errorf("none: short p99 %.2fx not worse than metaroce's %.2fx", short(n).P99OverIdeal, short(m).P99OverIdeal)
	}
}

func TestCCDeterministic(t *testing.T) {
	cfg := CCConfig{Scenario: "mixed", Senders: 2, Seed: 7, Duration: 500 * time.Microsecond}
	a, b := runCC(t, cfg), runCC(t, cfg)
	a.WallS, b.WallS = 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different results:\n%+v\n%+v", a, b)
	}
}

// TestReceiverHintsFairShare: a receiver with two senders hints each
// about half of 95% of its downlink in its acks, and a lone sender gets
// no hint.
func TestReceiverHintsFairShare(t *testing.T) {
	for _, senders := range []int{1, 2} {
		cfg := CCConfig{Scenario: "fairness", Seed: 3, Senders: senders}
		if err := cfg.fill(); err != nil {
			t.Fatal(err)
		}
		s, err := newStar(cfg, senders, cfg.Size*4)
		if err != nil {
			t.Fatal(err)
		}
		conns := make([]*transport.Conn, senders)
		if err := s.connect(conns, func(now Time) {
			for i, w := range newWriters(s, s.senders, conns, cfg.Size, 4, now+Time(300*time.Microsecond), nil) {
				w.conn = conns[i]
				w.start(now)
			}
		}); err != nil {
			t.Fatal(err)
		}
		s.n.Run(Time(250*time.Microsecond), nil)
		want := 0.95 * cfg.RateBps / float64(senders)
		for i, c := range conns {
			st, ok := c.Congestion()
			if !ok {
				t.Fatal("no congestion state")
			}
			switch {
			case senders == 1 && st.Hint != 0:
				t.Errorf("lone sender hinted %d b/s", st.Hint)
			case senders > 1 && (float64(st.Hint) < 0.9*want || float64(st.Hint) > 1.1*want):
				t.Errorf("sender %d of %d hinted %.3g b/s, want ~%.3g", i, senders, float64(st.Hint), want)
			}
		}
	}
}
