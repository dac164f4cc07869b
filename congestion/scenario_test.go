package congestion

import (
	"testing"
	"time"
)

// The fluid-model scenarios: what each algorithm promises on one
// bottleneck (100 Gb/s, 10 us base RTT, BDP 125 KB, MSS 4 KB).

// Four metaroce flows join one after another, 1 ms apart: each join
// settles to fair shares (Jain >= 0.95 over 50 us bins) within 50 base
// RTTs, the queue stays near the target (5 us + flow scaling) once
// settled, and the link stays busy.
func TestFluidMetaroceFairnessAndQueue(t *testing.T) {
	m := newModel(t, bottleneck100G())
	m.senders(4, "metaroce", ms)
	m.record(0)
	m.run(5 * ms)
	for k := 1; k < 4; k++ {
		from := time.Duration(k) * ms
		to := min(from+ms, 5*ms)
		if k == 3 {
			to = 5 * ms
		}
		s := m.settle(idx(k+1), from, to, 0.95)
		maxQ, meanQ := m.queueStats(from+500*us, to)
		t.Logf("join %d: Jain >= 0.95 after %v (%.0f RTTs); settled queue max %.0f KB (%s), mean %.0f KB",
			k+1, s, m.rtts(s), maxQ/kb, m.l.queueDelay(maxQ), meanQ/kb)
		if s < 0 || s > 50*m.l.base {
			t.Errorf("join %d: settled after %v, want within 50 RTTs", k+1, s)
		}
		if maxQ > 120*kb {
			t.Errorf("join %d: settled queue reached %.0f KB, want <= 120 KB", k+1, maxQ/kb)
		}
	}
	t.Logf("utilisation %.3f, queue max %.0f KB (a join's first window), p99 %.0f KB", m.utilisation(), m.queueMax()/kb, m.queueP99()/kb)
	if u := m.utilisation(); u < 0.9 {
		t.Errorf("utilisation %.3f, want > 0.9", u)
	}
	if m.drops > 0 {
		t.Errorf("%.0f bytes dropped", m.drops)
	}
}

// DCQCN on the RED marking it was designed for (here Kmin 20 KB, Kmax
// 200 KB, Pmax 5%): four flows joining 2 ms apart converge, slowly (its
// additive increase is 40 Mb/s per 55 us), with a bounded queue.
func TestFluidDCQCNConvergesUnderMarking(t *testing.T) {
	m := newModel(t, bottleneck100G().red(20*kb, 200*kb, 0.05))
	m.senders(4, "dcqcn", 2*ms)
	m.record(0)
	m.run(40 * ms)
	s := m.settle(idx(4), 6*ms, 40*ms, 0.95)
	maxQ, meanQ := m.queueStats(10*ms, 40*ms)
	t.Logf("Jain >= 0.95 after %v (%.0f RTTs) from the last join; queue max %.0f KB mean %.0f KB after 10 ms; utilisation %.3f",
		s, m.rtts(s), maxQ/kb, meanQ/kb, m.utilisation())
	if s < 0 || s > 25*ms {
		t.Errorf("dcqcn settled after %v, want within 25 ms", s)
	}
	if maxQ > 150*kb {
		t.Errorf("queue reached %.0f KB, want <= 150 KB", maxQ/kb)
	}
	if u := m.utilisation(); u < 0.9 {
		t.Errorf("utilisation %.3f, want > 0.9", u)
	}
}

// With step marking every flow sees every mark at once: DCQCN's cuts are
// synchronised and proportional, so the shares the join order gave stay
// (the model shows why DCQCN needs RED's per-packet randomness).
func TestFluidDCQCNStepMarkingKeepsJoinOrder(t *testing.T) {
	m := newModel(t, bottleneck100G())
	m.senders(4, "dcqcn", 2*ms)
	m.record(0)
	m.run(20 * ms)
	js := m.jainOver(idx(4))
	t.Logf("Jain after 20 ms with step marking: %.3f", js[len(js)-1])
	if js[len(js)-1] > 0.9 {
		t.Errorf("Jain %.3f: expected step marking to leave dcqcn unfair", js[len(js)-1])
	}
}

// No congestion control: each flow keeps MaxWindow (4 BDP) in flight, so
// the queue holds all of it but one BDP, 15x metaroce's.
func TestFluidNoneFillsTheQueue(t *testing.T) {
	m := newModel(t, bottleneck100G())
	m.senders(4, "none", ms)
	m.record(0)
	m.run(5 * ms)
	_, meanQ := m.queueStats(4*ms, 5*ms)
	want := 4*4*m.l.bdp() - m.l.bdp()
	t.Logf("queue %.0f KB (%s); 4 x MaxWindow - BDP = %.0f KB", meanQ/kb, m.l.queueDelay(meanQ), want/kb)
	if meanQ < 0.98*want || meanQ > 1.02*want {
		t.Errorf("queue %.0f KB, want %.0f KB", meanQ/kb, want/kb)
	}

	// With a 1 MB buffer it overflows and loses.
	m = newModel(t, bottleneck100G().bufferOf(1000*kb))
	m.senders(4, "none", ms)
	m.record(0)
	m.run(5 * ms)
	t.Logf("1 MB buffer: queue max %.0f KB, %.0f KB dropped", m.queueMax()/kb, m.drops/kb)
	if m.drops == 0 || m.queueMax() < 999*kb {
		t.Errorf("queue max %.0f KB, drops %.0f: want a full buffer and losses", m.queueMax()/kb, m.drops)
	}
}

// incast runs 32 senders of name against one receiver from t=0 and
// returns, per base RTT, Jain's index of their pacing rates, their sum as
// a fraction of C and the queue.
func incast(t *testing.T, name string, l link, rtts int) (m *model, jains, sums, queues []float64) {
	m = newModel(t, l)
	if name == "receiver-hint" {
		m.withFairShare(FairShareConfig{})
	}
	m.senders(32, name, 0)
	m.record(0)
	rates := make([]float64, 32)
	for r := 0; r < rtts; r++ {
		m.run(l.base)
		sum := 0.0
		for i, f := range m.flows {
			p := float64(f.cc.PacingRate())
			if p == 0 {
				p = float64(f.cc.Window()) * 8 / l.base.Seconds()
			}
			rates[i] = p
			sum += p
		}
		jains = append(jains, jain(rates))
		sums = append(sums, sum/8/l.capacity)
		queues = append(queues, m.q)
	}
	return m, jains, sums, queues
}

// 32:1 incast with receiver-hint and a FairShare at the receiver: the
// senders' rates are equal (Jain >= 0.95) and add up to at most C from the third base
// RTT on (the first brings the receiver the 32 senders, the second its
// hints back). The queue is what the first, hint-less RTT put there (31
// BDP at an initial window of one BDP); the target/RTT scaling drains
// it, and afterwards it stays empty at 95% utilisation.
func TestFluidReceiverHintIncast32(t *testing.T) {
	m, jains, sums, queues := incast(t, "receiver-hint", bottleneck100G(), 100)
	settled := -1
	for r := range jains {
		if jains[r] >= 0.95 && sums[r] <= 1 {
			if settled < 0 {
				settled = r
			}
		} else {
			settled = -1
		}
	}
	drained := -1
	for r, q := range queues {
		if q < 62.5*kb && drained < 0 {
			drained = r
		}
	}
	t.Logf("rates equal and sum <= C from base RTT %d on; peak queue %.0f KB; drained below target after %d base RTTs; final sum %.2f C",
		settled+1, m.queueMax()/kb, drained+1, sums[len(sums)-1])
	if settled < 0 || settled+1 > 3 {
		t.Errorf("settled at base RTT %d, want by the 3rd", settled+1)
	}
	if drained < 0 || drained+1 > 60 {
		t.Errorf("queue drained after %d RTTs, want within 60", drained+1)
	}
	if s := sums[len(sums)-1]; s < 0.9 || s > 1 {
		t.Errorf("final aggregate %.2f C, want 0.9..1", s)
	}
}

// The same incast with metaroce alone: slower (delay cuts at most once
// per RTT) but it drains and then holds the queue bounded.
func TestFluidMetaroceIncast32(t *testing.T) {
	m, _, _, queues := incast(t, "metaroce", bottleneck100G(), 300)
	maxQ := 0.0
	for _, q := range queues[150:] {
		maxQ = max(maxQ, q)
	}
	t.Logf("peak queue %.0f KB; after 150 base RTTs the queue stays below %.0f KB; utilisation %.3f", m.queueMax()/kb, maxQ/kb, m.utilisation())
	if maxQ > 300*kb {
		t.Errorf("queue after 150 RTTs reached %.0f KB, want <= 300 KB", maxQ/kb)
	}
	if u := m.utilisation(); u < 0.9 {
		t.Errorf("utilisation %.3f, want > 0.9", u)
	}
}
