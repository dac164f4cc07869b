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
	sd := notifier{log: log}
	go func() {
		<-ctx.Done()
		sd.stopping()
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloads := make(chan Reload)
	go func() {
		cur := cfg
		for range hup {
			sd.reloading()
			status := reload(ctx, log, fl, *path, &cur, reloads)
			sd.ready(status)
		}
	}()
	opts := Options{IPv6: *ipv6, CPU: *cpu, Reloads: reloads,
		Ready: func() { sd.ready("serving") }, Watchdog: sd.watchdog, WatchdogEvery: sd.watchdogEvery()}
	if err := Run(ctx, cfg, log, opts); err != nil {
		log.Error("metaroced failed", "err", err)
		return 1
	}
	return 0
}

// reload loads the configuration file again and applies what may change
// at run time, or nothing: a file that does not validate, or that changes
// a key that needs a restart, leaves the daemon on its running
// configuration, whole. It returns a status line for systemd.
func reload(ctx context.Context, log *slog.Logger, fl *config.Flags, path string, cur **config.Config, run chan<- Reload) string {
	next, err := fl.Load(path)
	if err != nil {
		log.Error("reload: configuration invalid, keeping the running one", "err", err)
		return "serving; last reload failed: invalid configuration"
	}
	changes, err := config.Reloadable(*cur, next)
	if err != nil {
		log.Error("reload refused", "err", err)
		return "serving; last reload refused: " + err.Error()
	}
	done := make(chan error, 1)
	select {
	case run <- Reload{Config: next, Done: done}:
	case <-ctx.Done():
		return "stopping"
	}
	if err := <-done; err != nil {
		log.Error("reload: keeping the running configuration", "err", err)
		return "serving; last reload failed: " + err.Error()
	}
	// The logger's level applies from here on; log_format and limits
	// need the handler swap and the client sessions (not here yet).
	levelVar.Set(next.SlogLevel())
	*cur = next
	log.Info("reloaded", "changes", changes)
	return "serving; reloaded"
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
