package transport

import (
	"fmt"
	"testing"
)

func testSender(tb testing.TB, k int) *sender {
	cfg := Config{Paths: k}
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	var s sender
	port := uint16(50000)
	s.init(&cfg, 512, 256, func() uint16 { port++; return port }, 12345, sendStore{})
	return &s
}

// fill makes p's ring full of transmissions still out (of a PSN not
// acknowledged), as a path whose window is used up.
func (s *sender) fill(p *sendPath) {
	for p.nextSeq-p.oldest != p.mask+1 {
		_, t := s.claim(p)
		*t = txRec{live: true, psn: s.nextPSN}
		p.inflight++
	}
}

// TestPickPathRules: with active paths, pickPath never picks a suspect
// one, avoids the path it is told to, and does not repeat the previous
// packet's path.
func TestPickPathRules(t *testing.T) {
	s := testSender(t, 16)
	for i := 0; i < 16; i += 3 {
		s.paths[i].state = pathSuspect
	}
	s.rebuildActive()
	prev := -1
	for i := 0; i < 10000; i++ {
		k := s.pickPath(5)
		if k < 0 || s.paths[k].state != pathActive {
			t.Fatalf("picked %d (state %v)", k, s.paths[k].state)
		}
		if k == 5 {
			t.Fatal("picked the avoided path")
		}
		if k == prev {
			t.Fatalf("picked path %d twice in a row", k)
		}
		prev = k
	}
	// All suspect: fall back rather than stall.
	for i := range s.paths {
		s.paths[i].state = pathSuspect
	}
	s.rebuildActive()
	if k := s.pickPath(-1); k < 0 {
		t.Fatal("no path when all are suspect")
	}
}

// TestPickPathRetransmissionRanks (§8.7.3): a retransmission goes on a
// proven path (acked, its latest transmission arrived) whenever one has
// room; with none, on a path that has lost nothing over one that lost its
// latest; on the path that lost the packet only when nothing else has
// room. New packets ignore the ranks.
func TestPickPathRetransmissionRanks(t *testing.T) {
	s := testSender(t, 16)
	// 0-3 proven; 4-11 lost their latest; 12-15 untried.
	for i := 0; i < 12; i++ {
		s.paths[i].acked = 5
		if i >= 4 {
			s.paths[i].lossRun = 1
		}
	}
	for i := 0; i < 2000; i++ {
		if k := s.pickPath(7); k > 3 {
			t.Fatalf("retransmission on path %d (lost %d in a row) with proven paths free", k, s.paths[k].lossRun)
		}
	}
	newOnLossy := 0
	for i := 0; i < 2000; i++ {
		if k := s.pickPath(-1); k >= 4 && k < 12 {
			newOnLossy++
		}
	}
	if newOnLossy == 0 {
		t.Error("new packets never used the paths with a loss: ranks leaked into spraying")
	}
	// Proven paths full: untried ones next.
	for i := 0; i < 4; i++ {
		s.fill(&s.paths[i])
	}
	for i := 0; i < 2000; i++ {
		if k := s.pickPath(7); k < 12 {
			t.Fatalf("retransmission on path %d with untried paths free", k)
		}
	}
	// Only lossy paths have room: any but the one that lost it.
	for i := 12; i < 16; i++ {
		s.fill(&s.paths[i])
	}
	for i := 0; i < 2000; i++ {
		if k := s.pickPath(7); k == 7 || k < 4 || k >= 12 {
			t.Fatalf("retransmission on path %d", k)
		}
	}
	// Only the path that lost it has room: still sent.
	for i := 4; i < 12; i++ {
		if i != 7 {
			s.fill(&s.paths[i])
		}
	}
	if k := s.pickPath(7); k != 7 {
		t.Fatalf("picked %d, want 7, the only path with room", k)
	}
}

// TestPickPathPrefersCheap: a path with a high loss rate gets a small
// share.
func TestPickPathPrefersCheap(t *testing.T) {
	s := testSender(t, 8)
	for i := range s.paths {
		s.paths[i].srtt = 10000
	}
	s.paths[0].lossRate = 0.2
	n := make([]int, 8)
	for i := 0; i < 80000; i++ {
		n[s.pickPath(-1)]++
	}
	if n[0] > 80000/8/3 {
		t.Errorf("lossy path got %d of 80000 (fair share 10000)", n[0])
	}
}

// BenchmarkPickPath: per-packet cost of path selection.
func BenchmarkPickPath(b *testing.B) {
	for _, k := range []int{16, 256} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			s := testSender(b, k)
			for i := range s.paths {
				s.paths[i].inflight = i % 7
				s.paths[i].srtt = Duration(5000 + 100*i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.pickPath(-1)
			}
		})
	}
}
