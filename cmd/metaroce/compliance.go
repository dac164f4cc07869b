package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/compliance"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/testnet"
)

// runCompliance is `metaroce compliance`: the packet-level conformance
// suite (compliance/, docs/compliance.md) against a running target
// (-target) or a metaroced it starts in a network namespace (-spawn).
func runCompliance(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce compliance", out)
	target := fs.String("target", "", "`address` of a running MetaRoCE endpoint to test")
	local := fs.String("local", "", "the suite's own `address` (default: the address the kernel routes to the target from)")
	alt := fs.String("alt", "", "a second local `address` for the wrong-address cases (optional)")
	control := fs.String("socket", "", "the target's control `socket`, for the expose op (memory cases)")
	service := fs.Uint("service", 0, "service id to connect to when the target exposes no memory")
	spawn := fs.Bool("spawn", false, "start metaroced in a network namespace and test it (root)")
	backend := fs.String("backend", "udp", "-spawn: the daemon's backend: udp, afxdp or auto")
	ipv6 := fs.Bool("ipv6", false, "-spawn: run over IPv6")
	port := fs.Uint("port", 4792, "MetaRoCE UDP port of both ends, 1 to 65535")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	junit := fs.String("junit", "", "also write JUnit XML to `file`")
	run := fs.String("run", "", "comma-separated case ids or clauses (\"7.3\", \"9\") to run")
	var timeout, quiet time.Duration
	cli.DurationVar(fs, &timeout, "timeout", 300*time.Millisecond, "longest wait for a reply")
	cli.DurationVar(fs, &quiet, "quiet", 60*time.Millisecond, "how long to listen where nothing may come back")
	dscpData := fs.Int("dscp-data", 26, "the target's data DSCP, 0 to 63 (-1: do not check)")
	dscpControl := fs.Int("dscp-control", 48, "the target's control DSCP, 0 to 63 (-1: do not check)")
	replyRate := fs.Int("reply-rate", 64, "the target's stateless reply limit per ms (§7.8; 0: do not check)")
	list := fs.Bool("list", false, "list the cases (id, clause, level, title) and exit")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.Check(cli.Range{Flag: "port", Value: float64(*port), Min: 1, Max: 65535},
		cli.Range{Flag: "service", Value: float64(*service), Min: 0, Max: 1<<32 - 1},
		cli.Int("dscp-data", *dscpData, -1, 63), cli.Int("dscp-control", *dscpControl, -1, 63),
		cli.Int("reply-rate", *replyRate, 0, 1<<20)); err != nil {
		return err
	}
	if timeout <= 0 || quiet <= 0 {
		return cli.UsageError("-timeout %v, -quiet %v: want positive durations", timeout, quiet)
	}
	if *backend != "udp" && *backend != "afxdp" && *backend != "auto" {
		return cli.UsageError("-backend %q: want udp, afxdp or auto", *backend)
	}
	if *list {
		for _, c := range compliance.Cases {
			lvl := "MUST"
			if c.Level == compliance.Should {
				lvl = "SHOULD"
			}
			fmt.Fprintf(out, "%-34s §%-7s %-6s %s\n", c.ID, c.Clause, lvl, c.Title)
		}
		return nil
	}
	if *spawn == (*target != "") {
		return cli.UsageError("give exactly one of -target ADDR and -spawn (run 'metaroce compliance -h' for the flags)")
	}
	o := compliance.Options{Port: uint16(*port), Service: uint32(*service), Timeout: timeout, Quiet: quiet,
		DSCPData: *dscpData, DSCPControl: *dscpControl, ReplyRate: *replyRate}
	if *run != "" {
		o.Run = strings.Split(*run, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var rep *compliance.Report
	var err error
	if *spawn {
		rep, err = spawnAndRun(ctx, o, *backend, *ipv6)
	} else {
		rep, err = targetRun(ctx, o, *target, *local, *alt, *control)
	}
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("compliance: interrupted")
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteTable(out)
	}
	if *junit != "" {
		f, err := os.Create(*junit)
		if err != nil {
			return err
		}
		if err := rep.WriteJUnit(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if rep.Failed > 0 {
		return fmt.Errorf("compliance: %d of %d cases failed", rep.Failed, len(rep.Cases))
	}
	return nil
}

func targetRun(ctx context.Context, o compliance.Options, target, local, alt, control string) (*compliance.Report, error) {
	var err error
	if o.Target, err = netip.ParseAddr(target); err != nil {
		return nil, fmt.Errorf("-target: %w", err)
	}
	if local != "" {
		if o.Local, err = netip.ParseAddr(local); err != nil {
			return nil, fmt.Errorf("-local: %w", err)
		}
	} else {
		// The address the kernel would send from: connect a UDP socket
		// (no packet leaves) and read its local end.
		c, err := net.Dial("udp", netip.AddrPortFrom(o.Target, o.Port).String())
		if err != nil {
			return nil, err
		}
		o.Local = c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		c.Close()
	}
	if alt != "" {
		if o.AltLocal, err = netip.ParseAddr(alt); err != nil {
			return nil, fmt.Errorf("-alt: %w", err)
		}
	}
	if control != "" {
		if o.Memory, err = compliance.ExposeControl(control, 5*time.Second); err != nil {
			return nil, err
		}
	}
	return compliance.Run(ctx, o)
}

// spawnAndRun builds two namespaces on one veth pair, starts metaroced
// (this binary's hidden daemon command) in B, and runs the suite from A,
// with a second address on A for the wrong-address cases. Everything is
// removed afterwards, whatever happens.
func spawnAndRun(ctx context.Context, o compliance.Options, backend string, ipv6 bool) (*compliance.Report, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("compliance -spawn: needs root (network namespaces): run with sudo, or test a running target with -target")
	}
	testnet.Sweep()
	pair, err := testnet.OpenPair(testnet.Config{})
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	altPrefix := netip.MustParsePrefix("10.99.0.3/24")
	if ipv6 {
		altPrefix = netip.MustParsePrefix("fd00:99::3/64")
	}
	if err := pair.A.Port.AddAddr(altPrefix); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metaroce-compliance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "target.sock")
	cfg := filepath.Join(dir, "target.yaml")
	yaml := fmt.Sprintf("port: %d\ninterfaces:\n  - name: %s\n    backend: %s\ncontrol_socket: %s\nmetrics_address: \"\"\nlog_level: warn\n",
		o.Port, pair.B.Port.Name, backend, sock)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dargs := []string{"daemon", "-config", cfg}
	if ipv6 {
		dargs = append(dargs, "-ipv6")
	}
	cmd := pair.B.Command(dctx, self, dargs...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	if o.Memory, err = compliance.ExposeControl(sock, 10*time.Second); err != nil {
		return nil, err
	}
	o.Target, o.Local, o.AltLocal = pair.B.IPv4, pair.A.IPv4, altPrefix.Addr()
	if ipv6 {
		o.Target, o.Local = pair.B.IPv6, pair.A.IPv6
	}
	o.Listen = pair.A.ListenUDP
	rep, err := compliance.Run(ctx, o)
	if rep != nil {
		rep.Target = netip.AddrPortFrom(o.Target, o.Port).String() + " (metaroced, " + backend + " backend, spawned)"
	}
	return rep, err
}
