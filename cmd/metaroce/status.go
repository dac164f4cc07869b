package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/telemetry"
)

// The operator's commands: status (engines), qps (connections), paths
// (each connection's logical paths) and top (a live view). They read the
// daemon's control socket's watch stream (internal/daemon/telemetry.go),
// the same snapshots the Prometheus endpoint is made of.

// snapshotFlags are the flags the one-shot commands share.
type snapshotFlags struct {
	fs     *flag.FlagSet
	socket *string
	conns  *int
	asJSON *bool
}

func newSnapshotFlags(name string, out io.Writer) *snapshotFlags {
	fs := cli.NewFlagSet("metaroce "+name, out)
	return &snapshotFlags{fs: fs,
		socket: fs.String("socket", config.Defaults().ControlSocket, "the daemon's control `socket`"),
		conns:  fs.Int("conns", 32, fmt.Sprintf("connections per engine to list, the busiest first (bytes sent plus placed; 1 to %d)", telemetry.MaxTopConns)),
		asJSON: fs.Bool("json", false, "print the snapshot as one JSON object (the watch stream's, docs/api.md)")}
}

// parse parses args and refuses a value out of range, naming the flag.
func (f *snapshotFlags) parse(args []string) error {
	if err := cli.Parse(f.fs, args); err != nil {
		return err
	}
	return cli.Check(cli.Int("conns", *f.conns, 1, telemetry.MaxTopConns))
}

// checkWatchFlags refuses what the daemon's watch stream would refuse or
// quietly change: an interval under its 10 ms floor (0 would become its
// default of 1s), a connection count outside 1..telemetry.MaxTopConns
// (0 would become 32, more would be cut to the maximum) and a negative
// count of snapshots.
func checkWatchFlags(every time.Duration, conns, count int) error {
	if every < 10*time.Millisecond {
		return cli.UsageError("-interval %v: want at least 10ms", every)
	}
	return cli.Check(cli.Int("conns", conns, 1, telemetry.MaxTopConns), cli.Int("count", count, 0, 1<<30))
}

// emit prints the snapshot as JSON, or calls table for the human view.
func (f *snapshotFlags) emit(out io.Writer, s *telemetry.Snapshot, table func() error) error {
	if *f.asJSON {
		return json.NewEncoder(out).Encode(s)
	}
	return table()
}

// take returns one snapshot from the daemon.
func take(socket string, p daemon.WatchParams) (*telemetry.Snapshot, error) {
	c, err := daemon.Dial(socket, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var snap *telemetry.Snapshot
	p.Count = 1
	err = c.Watch(p, func(s *telemetry.Snapshot) error { snap = s; return nil })
	return snap, err
}

func runStatus(args []string, out io.Writer) error {
	f := newSnapshotFlags("status", out)
	if err := f.parse(args); err != nil {
		return err
	}
	s, err := take(*f.socket, daemon.WatchParams{Conns: -1})
	if err != nil {
		return err
	}
	return f.emit(out, s, func() error { writeStatus(out, s); return nil })
}

func runQPs(args []string, out io.Writer) error {
	f := newSnapshotFlags("qps", out)
	if err := f.parse(args); err != nil {
		return err
	}
	s, err := take(*f.socket, daemon.WatchParams{Conns: *f.conns})
	if err != nil {
		return err
	}
	return f.emit(out, s, func() error { writeQPs(out, s, nil); return nil })
}

func runPaths(args []string, out io.Writer) error {
	f := newSnapshotFlags("paths", out)
	conn := f.fs.String("conn", "", "only the connection with this local `id` (hex, as qps shows it)")
	if err := f.parse(args); err != nil {
		return err
	}
	s, err := take(*f.socket, daemon.WatchParams{Conns: *f.conns, Paths: true})
	if err != nil {
		return err
	}
	return emitPaths(out, s, *conn, *f.asJSON)
}

// emitPaths prints the paths of every listed connection, or, with conn,
// of that one only: in the table and in the JSON alike.
func emitPaths(out io.Writer, s *telemetry.Snapshot, conn string, asJSON bool) error {
	if conn != "" {
		if err := onlyConn(s, conn); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(out).Encode(s)
	}
	writePaths(out, s)
	return nil
}

// onlyConn drops every listed connection but the one whose id is conn
// (hex, any case); the engines' totals stay.
func onlyConn(s *telemetry.Snapshot, conn string) error {
	found := false
	for i := range s.Engines {
		e := &s.Engines[i]
		var keep []telemetry.ConnSnapshot
		for _, c := range e.Top {
			if strings.EqualFold(conn, telemetry.ConnID(c.ID)) {
				keep = append(keep, c)
			}
		}
		found = found || len(keep) > 0
		e.Top = keep
	}
	if !found {
		return fmt.Errorf("no connection %s among the listed ones (raise -conns?)", conn)
	}
	return nil
}

func table(out io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0) }

// writeStatus prints the engines and the interfaces' XDP counters.
func writeStatus(out io.Writer, s *telemetry.Snapshot) {
	tw := table(out)
	fmt.Fprintln(tw, "IFACE\tQUEUE\tBACKEND\tXDP\tZEROCOPY\tCONNS\tPATHS A/S\tRX PKTS\tTX PKTS\tRX BYTES\tTX BYTES\tDROPS\tRETX\tBUSY\tCPU (KERNEL)\tOK")
	for i := range s.Engines {
		e := &s.Engines[i]
		t := &e.Transport
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d/%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n",
			e.Iface, e.Queue, e.Link.Backend, dash(e.Link.XDPMode), yesNo(e.Link.ZeroCopy),
			e.Conns.Total, e.Conns.PathsActive, e.Conns.PathsSuspect,
			e.Engine.RxPackets, e.Engine.TxPackets, bytesStr(float64(t.RxBytes)), bytesStr(float64(t.TxBytes)),
			drops(e), t.DataRetransmitted, busy(e.Engine.BusyNanos, e.Engine.IdleNanos), cpuStr(e.Engine.CPU), yesNo(e.Responsive))
	}
	tw.Flush()
	for _, is := range s.Ifaces {
		if x := is.XDP; x != nil {
			fmt.Fprintf(out, "xdp %s: redirected %d, passed %d, redirect failed %d, dropped %d (short %d, version %d, fragment %d)\n",
				is.Name, x.Redirected, x.Passed, x.RedirectFailed, x.DroppedShort+x.DroppedVersion+x.DroppedFragment,
				x.DroppedShort, x.DroppedVersion, x.DroppedFragment)
		}
	}
}

// drops sums an engine's drops of every kind: link, kernel socket and
// transport.
func drops(e *telemetry.EngineSnapshot) uint64 {
	var n uint64
	t := &e.Transport
	for _, v := range t.RxMalformed {
		n += v
	}
	n += t.RxUnknownConn + t.RxWrongPeer + t.RxBadPath + t.RxBogusAck + t.RxUnexpected + t.OutOfOrderDropped
	if a := e.AFXDP; a != nil {
		for _, v := range a.RxBadFrame {
			n += v
		}
		n += a.RxNotForUs + a.RxMultiBuffer + a.TxNoNeighbor + a.TxFamily + a.TxRingFull
	}
	if u := e.UDP; u != nil {
		n += u.Truncated + u.SendErrors + u.SendFull
	}
	if x := e.XSK; x != nil {
		n += x.RxDropped + x.RxRingFull + x.RxFillRingEmptyDescs + x.RxInvalidDescs
	}
	return n
}

// rates are per-second figures between two snapshots of a connection; nil
// for a one-shot table.
type connRates map[uint32][2]float64 // sent, placed bytes per second

// writeQPs prints every listed connection of every engine.
func writeQPs(out io.Writer, s *telemetry.Snapshot, rates connRates) {
	tw := table(out)
	hdr := "IFACE\tQ\tCONN\tPEER\tSTATE\tSENT\tPLACED\tRETX\tLOST\tTIMEOUTS\tSRTT\tMIN RTT\tFABRIC RTT\tFABRIC MIN\tHOST DELAY\tPATHS A/S\tREPATHS\tCE\tCWND\tRATE"
	if rates != nil {
		hdr = "IFACE\tQ\tCONN\tPEER\tSTATE\tTX/s\tRX/s\tSENT\tPLACED\tRETX\tLOST\tTIMEOUTS\tSRTT\tMIN RTT\tFABRIC RTT\tFABRIC MIN\tHOST DELAY\tPATHS A/S\tREPATHS\tCE\tCWND\tRATE"
	}
	fmt.Fprintln(tw, hdr)
	for i := range s.Engines {
		e := &s.Engines[i]
		for j := range e.Top {
			c := &e.Top[j]
			cwnd, rate := "-", "-"
			if c.Congestion != nil {
				cwnd = bytesStr(float64(c.Congestion.Window))
				if c.Congestion.PacingRate > 0 {
					rate = bitsStr(float64(c.Congestion.PacingRate))
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t", e.Iface, e.Queue, telemetry.ConnID(c.ID), c.Peer, c.State)
			if rates != nil {
				r := rates[c.ID]
				fmt.Fprintf(tw, "%s\t%s\t", bitsStr(8*r[0]), bitsStr(8*r[1]))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\n",
				bytesStr(float64(c.BytesOut)), bytesStr(float64(c.BytesIn)), c.Retx, c.Lost, c.Timeouts,
				durStr(c.SRTT), durStr(c.MinRTT), durStr(c.FabricRTT), durStr(c.FabricMinRTT), durStr(c.HostDelay),
				c.PathsActive, c.PathsSuspect, c.Repaths, c.CEMarks, cwnd, rate)
		}
	}
	tw.Flush()
}

// writePaths prints the paths of every listed connection.
func writePaths(out io.Writer, s *telemetry.Snapshot) {
	for i := range s.Engines {
		e := &s.Engines[i]
		for j := range e.Top {
			c := &e.Top[j]
			fmt.Fprintf(out, "%s queue %d conn %s peer %s (%s): %d paths, %d active\n",
				e.Iface, e.Queue, telemetry.ConnID(c.ID), c.Peer, c.State, len(c.Paths), c.PathsActive)
			tw := table(out)
			fmt.Fprintln(tw, "  PATH\tENTROPY\tPLANE\tSTATE\tINFLIGHT\tSRTT\tMIN RTT\tMARKED\tLOSS\tSENT\tACKED\tLOST\tCE\tREPATHS")
			for _, p := range c.Paths {
				fmt.Fprintf(tw, "  %d\t%d\t%d\t%s\t%d\t%s\t%s\t%.1f%%\t%.1f%%\t%d\t%d\t%d\t%d\t%d\n",
					p.ID, p.Entropy, p.Plane, p.State, p.InFlight, durStr(p.SRTT), durStr(p.MinRTT),
					100*p.MarkFrac, 100*p.LossRate, p.Sent, p.Acked, p.Lost, p.Marked, p.Repaths)
			}
			tw.Flush()
			writePlanes(out, c)
		}
	}
}

// writePlanes prints the planes of a connection over several (docs/spec.md
// §7.9): the peer's address on each, its active paths, and whether it is
// down (§8.7.4) or not yet proven (§7.9).
func writePlanes(out io.Writer, c *telemetry.ConnSnapshot) {
	if len(c.Planes) == 0 {
		return
	}
	tw := table(out)
	fmt.Fprintln(tw, "  PLANE	PEER	STATE	ACTIVE PATHS	DOWN FOR")
	for _, p := range c.Planes {
		st, down := "up", "-"
		if p.Down {
			st, down = "DOWN", durStr(p.DownFor)
		}
		if p.Unproven {
			st = "UNPROVEN" // its address never answered (§7.9)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d/%d\t%s\n", p.Plane, p.Peer, st, p.ActivePaths, p.Paths, down)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func busy(b, i uint64) string {
	if b+i == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(b)/float64(b+i), 'f', 1, 64) + "%"
}

// cpuStr is an engine thread's CPU time so far and the kernel's share of
// it ("12.3s (74%)"), "-" when the engine is not running.
func cpuStr(c *dataplane.EngineCPU) string {
	if c == nil {
		return "-"
	}
	s := time.Duration(c.Nanos).Round(100 * time.Millisecond).String()
	if u := c.UserNanos + c.SysNanos; u > 0 {
		s += " (" + strconv.FormatFloat(100*float64(c.SysNanos)/float64(u), 'f', 0, 64) + "%)"
	}
	return s
}

// cpuRate is the share of one CPU an engine's thread used between two
// snapshots dt seconds apart, and the kernel's part of it ("87% (74%)").
func cpuRate(cur, old *dataplane.EngineCPU, dt float64) string {
	if cur == nil || old == nil || dt <= 0 || cur.Nanos < old.Nanos {
		return "-"
	}
	s := strconv.FormatFloat(100*float64(cur.Nanos-old.Nanos)/1e9/dt, 'f', 0, 64) + "%"
	if u, k := cur.UserNanos-old.UserNanos, cur.SysNanos-old.SysNanos; cur.UserNanos >= old.UserNanos && cur.SysNanos >= old.SysNanos && u+k > 0 {
		s += " (" + strconv.FormatFloat(100*float64(k)/float64(u+k), 'f', 0, 64) + "%)"
	}
	return s
}

func durStr(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Duration(ns).Round(100 * time.Nanosecond).String()
}

// bytesStr prints a byte count with a binary prefix.
func bytesStr(v float64) string {
	for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB"} {
		if v < 1024 || u == "TiB" {
			if u == "B" {
				return strconv.FormatFloat(v, 'f', 0, 64) + u
			}
			return strconv.FormatFloat(v, 'f', 1, 64) + u
		}
		v /= 1024
	}
	return ""
}

// bitsStr prints a bit rate with a decimal prefix.
func bitsStr(v float64) string {
	for _, u := range []string{"b/s", "kb/s", "Mb/s", "Gb/s", "Tb/s"} {
		if v < 1000 || u == "Tb/s" {
			return strconv.FormatFloat(v, 'f', 1, 64) + u
		}
		v /= 1000
	}
	return ""
}
