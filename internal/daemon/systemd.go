package daemon

import (
	"log/slog"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// systemd integration (deploy/metaroced.service is Type=notify):
//
//	READY=1       once the engines run and the control socket and the
//	              metrics endpoint listen (Options.Ready);
//	WATCHDOG=1    every half WatchdogSec, but only while every engine
//	              answers a no-op on its own goroutine (Options.Watchdog),
//	              so a wedged engine gets the daemon restarted;
//	RELOADING=1   on SIGHUP, then READY=1 once the new configuration is
//	              applied or refused (systemd 252 has no Type=notify-reload,
//	              so the daemon says it itself; MONOTONIC_USEC is what
//	              newer systemd wants beside RELOADING=1);
//	STOPPING=1    when a stop signal arrives.
//
// go-systemd reads NOTIFY_SOCKET and WATCHDOG_USEC (and WATCHDOG_PID) from
// the environment; without them every notification is a no-op, so the
// daemon runs the same outside systemd.
type notifier struct{ log *slog.Logger }

func (n notifier) send(state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		n.log.Warn("systemd notify", "state", state, "err", err)
	}
}

func (n notifier) ready(status string) { n.send("READY=1\nSTATUS=" + status) }
func (n notifier) reloading()          { n.send("RELOADING=1\n" + sd.SdNotifyMonotonicUsec()) }
func (n notifier) stopping()           { n.send("STOPPING=1") }
func (n notifier) watchdog()           { n.send(sd.SdNotifyWatchdog) }

// watchdogEvery returns how often to ping systemd's watchdog: half its
// timeout, as sd_watchdog_enabled(3) advises (0: no watchdog).
func (n notifier) watchdogEvery() time.Duration {
	d, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("systemd watchdog", "err", err)
		return 0
	}
	return d / 2
}
