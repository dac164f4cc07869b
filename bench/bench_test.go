package bench

import (
	"context"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// BenchmarkBaselines runs the three baselines once per iteration on one
// pair (raw) and one star (TCP, clean and at 1% loss) and reports their
// figures as metrics. It is a measurement, for
//
//	go test -run NONE -bench Baselines -benchtime 1x ./bench
//
// (ns/op is the wall time of one round of all of them, and means little).
func BenchmarkBaselines(b *testing.B) {
	needRoot(b)
	p := testnet.NewPair(b, testnet.Config{})
	s := testnet.NewStar(b, 2, testnet.Config{})
	ctx := context.Background()
	const d = time.Second
	var ours, theirs RawResult
	var clean, lossy TCPResult
	var err error
	for b.Loop() {
		if ours, err = RawAFXDP(ctx, p.A, p.B, RawOptions{Duration: d}); err != nil {
			b.Fatal(err)
		}
		if theirs, err = RawAsavie(ctx, p.A, p.B, RawOptions{Duration: d}); err != nil {
			b.Fatal(err)
		}
		if err = s.Switch.SetLoss(0); err != nil {
			b.Fatal(err)
		}
		if clean, err = TCP(ctx, s.Hosts[0], s.Hosts[1], TCPOptions{Duration: d}); err != nil {
			b.Fatal(err)
		}
		if err = s.Switch.SetLoss(0.01); err != nil {
			b.Fatal(err)
		}
		if lossy, err = TCP(ctx, s.Hosts[0], s.Hosts[1], TCPOptions{Duration: d}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ours.PPS/1e6, "xsk-Mpps")
	b.ReportMetric(ours.Gbps, "xsk-Gbps")
	b.ReportMetric(ours.LatP50, "xsk-p50-us")
	b.ReportMetric(ours.LatP99, "xsk-p99-us")
	b.ReportMetric(theirs.PPS/1e6, "asavie-Mpps")
	b.ReportMetric(theirs.LatP50, "asavie-p50-us")
	b.ReportMetric(ours.PPS/theirs.PPS, "xsk/asavie")
	b.ReportMetric(clean.Gbps, "tcp-Gbps")
	b.ReportMetric(lossy.Gbps, "tcp-1%loss-Gbps")
}
