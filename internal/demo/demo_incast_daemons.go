package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
)

// daemonSet is metaroced running in several hosts' namespaces, one process
// per host, as withDaemonsYAML runs two.
type daemonSet struct {
	cmds    []*exec.Cmd
	clients []*daemon.Client
	socks   []string
	cancel  context.CancelFunc
}

// startDaemons starts this binary's daemon command in each host's
// namespace with the given backend and extra top-level configuration
// lines, and dials each control socket. Daemon i's engine is pinned to CPU
// i mod NumCPU, so the receiver (host 0 of the caller's order) and the
// senders spread over the cores.
func startDaemons(self, dir, backend, tag string, hosts []*testnet.Host, extra string) (ds *daemonSet, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	ds = &daemonSet{cancel: cancel}
	defer func() {
		if err != nil {
			ds.stop()
		}
	}()
	for i, h := range hosts {
		sock := filepath.Join(dir, h.Label+"-"+tag+".sock")
		cfg := filepath.Join(dir, h.Label+"-"+tag+".yaml")
		yaml := fmt.Sprintf("interfaces:\n  - name: %s\n    backend: %s\ncontrol_socket: %s\nmetrics_address: \"\"\nlog_level: warn\n",
			h.Port.Name, backend, sock) + extra
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return ds, err
		}
		args := []string{"daemon", "-config", cfg, "-cpu", fmt.Sprint(i % runtime.NumCPU())}
		if d := os.Getenv("METAROCE_DEMO_PROFILE_DIR"); d != "" {
			// As withDaemonsYAML: a CPU profile per daemon.
			args = append(args, "-cpuprofile", filepath.Join(d, h.Label+"-"+tag+".prof"))
		}
		c := h.Command(ctx, self, args...)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return ds, err
		}
		ds.cmds = append(ds.cmds, c)
		ds.socks = append(ds.socks, sock)
	}
	for _, sock := range ds.socks {
		cl, err := daemon.Dial(sock, 10*time.Second)
		if err != nil {
			return ds, fmt.Errorf("daemon %s: %w", sock, err)
		}
		ds.clients = append(ds.clients, cl)
	}
	return ds, nil
}

// stats returns each daemon's transport counters summed over its engines.
func (ds *daemonSet) stats() ([]transportStats, error) {
	out := make([]transportStats, len(ds.clients))
	var errs []error
	for i, c := range ds.clients {
		st, err := c.Do(daemon.Request{Op: "status"})
		if err != nil {
			errs = append(errs, fmt.Errorf("status of %s: %w", ds.socks[i], err))
			continue
		}
		for _, e := range st.Engines {
			t := e.Transport
			ts := transportStats{Timeouts: t.Timeouts, Sent: t.DataSent, Retransmitted: t.DataRetransmitted,
				RxCE: t.RxCE, CEEchoed: t.CEEchoed}
			if e.XSK != nil {
				ts.RxRingFull = e.XSK.RxRingFull
			}
			out[i] = out[i].add(ts)
		}
	}
	return out, errors.Join(errs...)
}

// transportStats are the counters the demos report from a daemon: its
// transport's, and its AF_XDP sockets' RX ring overflows (packets the
// kernel dropped because the engine had not read its ring).
type transportStats struct {
	Timeouts, Sent, Retransmitted, RxCE, CEEchoed, RxRingFull uint64
}

func (a transportStats) add(b transportStats) transportStats {
	return transportStats{a.Timeouts + b.Timeouts, a.Sent + b.Sent, a.Retransmitted + b.Retransmitted, a.RxCE + b.RxCE,
		a.CEEchoed + b.CEEchoed, a.RxRingFull + b.RxRingFull}
}

func (a transportStats) sub(b transportStats) transportStats {
	return transportStats{a.Timeouts - b.Timeouts, a.Sent - b.Sent, a.Retransmitted - b.Retransmitted, a.RxCE - b.RxCE,
		a.CEEchoed - b.CEEchoed, a.RxRingFull - b.RxRingFull}
}

// stop closes the control connections and stops the daemons (SIGTERM, then
// SIGKILL after 5 s).
func (ds *daemonSet) stop() {
	for _, c := range ds.clients {
		c.Close()
	}
	for _, c := range ds.cmds {
		c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range ds.cmds {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
	ds.cancel()
}
