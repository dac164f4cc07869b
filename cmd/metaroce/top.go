package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/telemetry"
)

// clearHome moves the cursor home and clears the screen (ANSI), so each
// refresh redraws in place.
const clearHome = "\x1b[H\x1b[2J"

func runTop(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce top", out)
	socket := fs.String("socket", config.Defaults().ControlSocket, "the daemon's control `socket`")
	var every time.Duration
	cli.DurationVar(fs, &every, "interval", time.Second, "refresh `interval` (with a unit: 500ms, 2s; at least 10ms)")
	conns := fs.Int("conns", 10, fmt.Sprintf("connections per engine to show, the busiest first (1 to %d)", telemetry.MaxTopConns))
	count := fs.Int("count", 0, "stop after this many refreshes (0: until Ctrl-C)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := checkWatchFlags(every, *conns, *count); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := daemon.Dial(*socket, 2*time.Second)
	if err != nil {
		return err
	}
	// Ctrl-C closes the connection, which ends Watch.
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	defer c.Close()
	var prev *telemetry.Snapshot
	err = c.Watch(daemon.WatchParams{IntervalMS: int(every.Milliseconds()), Count: *count, Conns: *conns},
		func(s *telemetry.Snapshot) error {
			fmt.Fprint(out, clearHome)
			writeTop(out, prev, s)
			prev = s
			return nil
		})
	if ctx.Err() != nil {
		return nil // Ctrl-C
	}
	if err != nil && errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// writeTop renders one refresh: engines with rates since prev (none on the
// first), then the busiest connections.
func writeTop(out io.Writer, prev, s *telemetry.Snapshot) {
	dt := 0.0
	if prev != nil {
		dt = s.Time.Sub(prev.Time).Seconds()
	}
	fmt.Fprintf(out, "metaroce top  %s  (Ctrl-C to quit)\n\n", s.Time.Format(time.TimeOnly))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IFACE\tQUEUE\tBACKEND\tCONNS\tRX PPS\tTX PPS\tRX\tTX\tRETX/s\tDROPS/s\tBUSY\tCPU (KERNEL)\tPATHS A/S")
	rates := connRates{}
	for i := range s.Engines {
		e := &s.Engines[i]
		var p *telemetry.EngineSnapshot
		if prev != nil && i < len(prev.Engines) && prev.Engines[i].Iface == e.Iface && prev.Engines[i].Queue == e.Queue {
			p = &prev.Engines[i]
		}
		rate := func(cur, old uint64) float64 {
			if p == nil || dt <= 0 || cur < old {
				return 0
			}
			return float64(cur-old) / dt
		}
		var rxp, txp, rxb, txb, retx, dr float64
		bsy := busy(e.Engine.BusyNanos, e.Engine.IdleNanos)
		cpu := "-"
		if p != nil {
			cpu = cpuRate(e.Engine.CPU, p.Engine.CPU, dt)
			rxp, txp = rate(e.Engine.RxPackets, p.Engine.RxPackets), rate(e.Engine.TxPackets, p.Engine.TxPackets)
			rxb, txb = rate(e.Transport.RxBytes, p.Transport.RxBytes), rate(e.Transport.TxBytes, p.Transport.TxBytes)
			retx = rate(e.Transport.DataRetransmitted, p.Transport.DataRetransmitted)
			dr = rate(drops(e), drops(p))
			bsy = busy(e.Engine.BusyNanos-p.Engine.BusyNanos, e.Engine.IdleNanos-p.Engine.IdleNanos)
			old := map[uint32]*telemetry.ConnSnapshot{}
			for j := range p.Top {
				old[p.Top[j].ID] = &p.Top[j]
			}
			for j := range e.Top {
				if o := old[e.Top[j].ID]; o != nil {
					rates[e.Top[j].ID] = [2]float64{rate(e.Top[j].BytesOut, o.BytesOut), rate(e.Top[j].BytesIn, o.BytesIn)}
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.0f\t%.0f\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%d/%d\n", e.Iface, e.Queue, e.Link.Backend,
			e.Conns.Total, rxp, txp, bitsStr(8*rxb), bitsStr(8*txb), retx, dr, bsy, cpu, e.Conns.PathsActive, e.Conns.PathsSuspect)
	}
	tw.Flush()
	fmt.Fprintln(out)
	writeQPs(out, s, rates)
}
