package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/control/config"
)

// The configuration accepts the congestion algorithms the congestion
// package knows (it is not wired into the transport yet: issue 4).
func init() { config.KnownCongestion = congestion.Known }

// Main is metaroced's command line: flags, configuration, logging,
// signals. It runs in the foreground (systemd supervises; a daemon that
// daemonizes itself hides its failures) and returns the exit code.
func Main(name string, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration `file` (YAML); empty: defaults and flags only")
	ipv6 := fs.Bool("ipv6", false, "use the interfaces' IPv6 addresses when none is configured")
	cpu := fs.Int("cpu", -1, "pin the engine threads to this `CPU` (-1: let the scheduler place them)")
	cpuprofile := fs.String("cpuprofile", "", "write a Go CPU profile to `file` until the daemon stops")
	fl := config.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := fl.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	log := newLogger(cfg, stderr)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		cur := cfg
		for range hup {
			next, err := fl.Load(*path)
			if err != nil {
				log.Error("reload: configuration invalid, keeping the running one", "err", err)
				continue
			}
			changes, err := config.Reloadable(cur, next)
			if err != nil {
				log.Error("reload refused", "err", err)
				continue
			}
			// Of what may change at run time, this version applies the
			// log level and the session limits; the metrics endpoint
			// arrives with the telemetry package.
			levelVar.Set(next.SlogLevel())
			if srv := setLimits.Load(); srv != nil {
				srv.SetLimits(next.Limits)
			}
			cur = next
			log.Info("reloaded", "changes", changes)
		}
	}()
	if err := Run(ctx, cfg, log, Options{IPv6: *ipv6, CPU: *cpu}); err != nil {
		log.Error("metaroced failed", "err", err)
		return 1
	}
	return 0
}

var levelVar slog.LevelVar

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	levelVar.Set(cfg.SlogLevel())
	o := &slog.HandlerOptions{Level: &levelVar}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}
