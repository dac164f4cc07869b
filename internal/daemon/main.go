package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/version"
)

// The configuration accepts the congestion algorithms the congestion
// package knows (it is not wired into the transport yet: issue 4).
func init() { config.KnownCongestion = congestion.Known }

// Main is metaroced's command line: flags, configuration, logging,
// signals. It runs in the foreground (systemd supervises; a daemon that
// daemonizes itself hides its failures) and returns the exit code.
func Main(name string, args []string, stderr io.Writer) int {
	fs := cli.NewFlagSet(name, stderr)
	path := fs.String("config", "", "configuration `file` (YAML); empty: defaults and flags only")
	ipv6 := fs.Bool("ipv6", false, "use the interfaces' IPv6 addresses when none is configured")
	cpu := fs.Int("cpu", -1, "pin the engine threads to this `CPU` (-1: let the scheduler place them)")
	cpuprofile := fs.String("cpuprofile", "", "write a Go CPU profile to `file` until the daemon stops")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fl := config.BindFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return cli.Exit(name, err, stderr)
	}
	if *showVersion {
		fmt.Fprintln(os.Stdout, name, version.String())
		return 0
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
	// Level and format apply from here on; limits arrive with the
	// client sessions.
	levelVar.Set(next.SlogLevel())
	setLogFormat(next.LogFormat, nil)
	*cur = next
	log.Info("reloaded", "changes", changes)
	return "serving; reloaded"
}

var levelVar slog.LevelVar

// logFormat lets a reload switch log_format: the daemon's handler forwards
// every record to the handler this holds.
var logFormat switchHandler

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	levelVar.Set(cfg.SlogLevel())
	logFormat = switchHandler{cur: new(atomic.Pointer[slog.Handler])}
	setLogFormat(cfg.LogFormat, w)
	return slog.New(logFormat)
}

// logOut is where the log goes (set once, by newLogger's caller).
var logOut io.Writer

func setLogFormat(format string, w io.Writer) {
	if w != nil {
		logOut = w
	}
	o := &slog.HandlerOptions{Level: &levelVar}
	var h slog.Handler = slog.NewTextHandler(logOut, o)
	if format == "json" {
		h = slog.NewJSONHandler(logOut, o)
	}
	logFormat.cur.Store(&h)
}

// switchHandler forwards to a handler that can be replaced at run time.
// Attributes and groups added with With are kept as steps and replayed
// on the current handler for each record: logging is a cold path here,
// and this keeps loggers derived before a reload following it.
type switchHandler struct {
	cur   *atomic.Pointer[slog.Handler]
	steps []func(slog.Handler) slog.Handler
}

func (s switchHandler) inner() slog.Handler {
	h := *s.cur.Load()
	for _, f := range s.steps {
		h = f(h)
	}
	return h
}

func (s switchHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return (*s.cur.Load()).Enabled(ctx, l)
}

func (s switchHandler) Handle(ctx context.Context, r slog.Record) error {
	return s.inner().Handle(ctx, r)
}

func (s switchHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return s.with(func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })
}

func (s switchHandler) WithGroup(name string) slog.Handler {
	return s.with(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

func (s switchHandler) with(f func(slog.Handler) slog.Handler) slog.Handler {
	return switchHandler{cur: s.cur, steps: append(slices.Clip(s.steps), f)}
}
