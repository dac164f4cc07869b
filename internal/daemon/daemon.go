// Package daemon is metaroced: it turns a validated configuration into
// running engines (one per interface queue, each with its transport
// endpoint and link), serves the control socket, and shuts everything down
// in order when its context ends. cmd/metaroced is a thin main around Run,
// and the metaroce tool's hidden "daemon" command runs the same code, so the
// demo can start real daemon processes inside namespaces from one binary.
//
// Backend choice per interface: "afxdp" requires AF_XDP; "udp" uses the
// UDP-socket backend; "auto" tries AF_XDP and falls back to UDP, logging
// why (missing privileges, no XDP support, ...).
//
// Telemetry: the Prometheus endpoint (metrics.go) and the control
// socket's watch stream (telemetry.go) both read telemetry snapshots,
// taken on the engine goroutines between loop iterations; systemd hears
// READY, WATCHDOG, RELOADING and STOPPING through NOTIFY_SOCKET
// (systemd.go).
//
// Several queues on one interface (AF_XDP) run one engine each; RSS may
// deliver a connection's packets to any of them, so connection ids carry
// their owner engine's index and engines hand each other what they do not
// own (dataplane.ConnectEngines). The UDP backend has one socket per
// interface and so one engine, whatever the queue list says.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/afxdp"
	"github.com/metaroce/metaroce/dataplane/udplink"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/transport"
)

// Options are what the command line adds to the configuration.
type Options struct {
	// IPv6 picks the interfaces' IPv6 address when none is configured.
	IPv6 bool
	// Ready, if set, is called once the engines run and the control
	// socket listens (systemd's READY=1 hooks in here).
	Ready func()
	// CPU, if >= 0, pins the engine threads to that CPU.
	CPU int
	// Watchdog, if set, is called every WatchdogEvery while every engine
	// answers (systemd's WATCHDOG=1): a stuck engine stops the pings and
	// lets systemd restart the daemon.
	Watchdog      func()
	WatchdogEvery time.Duration
	// Reloads delivers validated configurations to apply at run time
	// (SIGHUP): Run applies what may change (metrics_address) and answers
	// on Done.
	Reloads <-chan Reload
}

// Reload asks a running daemon to apply Config, whose differences from
// the running configuration config.Reloadable has already accepted.
type Reload struct {
	Config *config.Config
	Done   chan<- error
}

// engine is one running engine and what it needs to report.
type engine struct {
	iface string
	e     *dataplane.Engine
	ep    *transport.Endpoint
	link  dataplane.Link
	xdp   *afxdp.Iface  // nil for the UDP backend; set on the interface's first engine only
	prog  *bpf.Program  // the interface's XDP program (every engine of it), nil for UDP
	afx   *afxdp.Link   // the AF_XDP link, nil for UDP
	udp   *udplink.Link // the UDP link, nil for AF_XDP
	// ctl serves the applications' queue pairs; the completions of
	// other connections go to its Inner, which the expose op sets
	// (expose.go) and is nil until then.
	ctl   *control.EngineDriver
	local netip.Addr
}

// Daemon is a running metaroced.
type Daemon struct {
	cfg     *config.Config
	log     *slog.Logger
	engines []*engine
	wg      sync.WaitGroup
}

// Run starts the daemon and blocks until ctx ends, then shuts down:
// engines stop, sockets close, XDP programs detach (only ours: bpf_link).
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, opts Options) error {
	claims, err := claimAll(cfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range claims {
			c.release()
		}
	}()
	d := &Daemon{cfg: cfg, log: log}
	defer d.close()
	for _, ic := range cfg.Interfaces {
		ens, err := d.open(ic, opts)
		if err != nil {
			return err
		}
		d.engines = append(d.engines, ens...)
		for _, en := range ens {
			inf := en.link.Info()
			log.Info("engine up", "iface", ic.Name, "queue", inf.Queue, "backend", inf.Backend,
				"xdp_mode", inf.XDPMode, "zerocopy", inf.ZeroCopy, "local", en.local, "why", inf.Why)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(d.engines)+1)
	for _, en := range d.engines {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := en.e.Run(ctx); err != nil {
				errs <- fmt.Errorf("engine %s: %w", en.iface, err)
				cancel()
			}
		}()
	}
	srv, stopControl, err := d.serveControl(ctx)
	if err != nil {
		cancel()
		d.wg.Wait()
		return err
	}
	defer stopControl()
	// The metrics listener opens on this goroutine, so on the thread (and
	// in the network namespace) Run was called on, and so do its reopens.
	ms := newMetricsServer(log, d.telemetryEngines())
	defer ms.close()
	if err := ms.listen(cfg.MetricsAddress); err != nil {
		cancel()
		d.wg.Wait()
		return err
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	if opts.Watchdog != nil && opts.WatchdogEvery > 0 {
		go d.watchdog(ctx, opts.Watchdog, opts.WatchdogEvery)
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case r := <-opts.Reloads:
			srv.SetLimits(r.Config.Limits) // sessions are held to them from their next request
			r.Done <- ms.listen(r.Config.MetricsAddress)
		}
	}
	d.wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	log.Info("stopped")
	return nil
}

func (d *Daemon) open(ic config.Interface, opts Options) ([]*engine, error) {
	var (
		links []dataplane.Link
		local netip.Addr
		fi    *afxdp.Iface
		ul    *udplink.Link // the UDP link, if that is the backend
		why   string
	)
	if err := checkMTU(d.log, ic.Name, d.cfg.MTU); err != nil {
		return nil, err
	}
	if ic.Backend == config.BackendAFXDP || ic.Backend == config.BackendAuto {
		qs := make([]uint32, len(ic.Queues))
		for i, q := range ic.Queues {
			qs[i] = uint32(q)
		}
		var err error
		fi, err = afxdp.OpenIface(afxdp.IfaceConfig{
			Name: ic.Name, Queues: qs, Local: ic.Address, IPv6: opts.IPv6,
			Port: uint16(d.cfg.Port), MTU: d.cfg.MTU, Mode: xdpMode(ic.XDPMode), XSK: xsk.Config{Mode: bindMode(ic.Zerocopy)},
			DSCPData: uint8(d.cfg.DSCPData), DSCPControl: uint8(d.cfg.DSCPControl),
		})
		switch {
		case err == nil:
			for _, l := range fi.Links {
				links = append(links, l)
			}
			local = fi.Local
		case ic.Backend == config.BackendAFXDP:
			return nil, err
		default:
			why = "AF_XDP unavailable: " + err.Error()
			fi = nil
		}
	}
	if links == nil {
		local = ic.Address
		if !local.IsValid() {
			var err error
			if local, err = ifaceAddr(ic.Name, opts.IPv6); err != nil {
				return nil, err
			}
		}
		// GSO and GRO: the link groups a batch per source-port socket, so
		// a run of one path's packets still goes down as one entry; on
		// the demo's star they took the UDP backend from 1.2-2.5 to
		// 3.0-4.4 Gb/s in the same session.
		uc := udplink.Config{Local: local, Port: uint16(d.cfg.Port),
			MaxPayload: d.cfg.MTU - 48, DSCPData: uint8(d.cfg.DSCPData), DSCPControl: uint8(d.cfg.DSCPControl), GSO: true}
		udpSrcPortConfig(&uc, d.cfg.TransportConfig()) // udpentropy.go
		var err error
		ul, err = udplink.Open(uc)
		if err != nil {
			return nil, fmt.Errorf("interface %s: udp backend: %w", ic.Name, err)
		}
		if why != "" {
			d.log.Warn("falling back to the UDP backend", "iface", ic.Name, "reason", why)
		}
		if len(ic.Queues) > 1 {
			why = strings.TrimPrefix(why+"; one UDP socket, so one engine for all queues", "; ")
		}
		links = []dataplane.Link{&whyLink{Link: ul, why: why}}
	}
	links = faultLinks(links) // tests only (expose.go)
	var ens []*engine
	fail := func(err error) ([]*engine, error) {
		if fi != nil {
			fi.Close()
		} else {
			for _, l := range links {
				l.Close()
			}
		}
		return nil, err
	}
	for i, l := range links {
		tc := d.cfg.TransportConfig()
		tc.Port = uint16(d.cfg.Port)
		tc.MTU = d.cfg.MTU
		tc.Congestion = d.cfg.Congestion
		if ul != nil {
			udpEntropy(&tc, ul) // udpentropy.go
		}
		if len(links) > 1 {
			tc.IDMask, tc.IDTag = dataplane.IDMask(len(links)), uint32(i)
		}
		if err := checkLinkMTU(ic.Name, l, &tc); err != nil {
			return fail(err)
		}
		ep, err := transport.NewEndpoint(tc, local)
		if err != nil {
			return fail(err)
		}
		en := &engine{iface: ic.Name, link: l, ep: ep, local: local}
		if en.ctl, err = control.NewEngineDriver(nil); err != nil {
			return nil, err
		}
		if i == 0 {
			en.xdp = fi // closes every link of the interface
		}
		if fi != nil {
			en.prog, en.afx = fi.Program, fi.Links[i]
		} else if w, ok := l.(*whyLink); ok {
			en.udp = w.Link
		}
		ec := dataplane.EngineConfig{Batch: engineBatch}
		if opts.CPU >= 0 {
			ec.CPU, ec.PinSet = (opts.CPU+i)%runtime.NumCPU(), true
		}
		en.e = dataplane.NewEngine(ec, l, ep, en.ctl)
		ens = append(ens, en)
	}
	if len(ens) > 1 {
		es := make([]*dataplane.Engine, len(ens))
		for i, en := range ens {
			es[i] = en.e
		}
		dataplane.ConnectEngines(es, 1024)
	}
	return ens, nil
}

// whyLink adds the reason for the backend choice to a UDP link's Info.
// It embeds the concrete link, not the interface, so the engine still
// sees its PollFD and sleeps on the socket and the applications' doorbell
// together (an interface would hide the method, and the engine would
// fall back to polling every 50 us).
type whyLink struct {
	*udplink.Link
	why string
}

func (w *whyLink) Info() dataplane.LinkInfo {
	inf := w.Link.Info()
	if w.why != "" {
		if inf.Why != "" {
			inf.Why = w.why + "; " + inf.Why
		} else {
			inf.Why = w.why
		}
	}
	return inf
}

func (d *Daemon) close() {
	for _, en := range d.engines {
		switch {
		case en.xdp != nil:
			en.xdp.Close() // closes the interface's links too
		case !en.afxdp():
			en.link.Close()
		}
	}
}

func (en *engine) afxdp() bool { return en.link.Info().Backend == "afxdp" }

func xdpMode(m config.XDPMode) bpf.Mode {
	switch m {
	case config.XDPNative:
		return bpf.ModeNative
	case config.XDPGeneric:
		return bpf.ModeGeneric
	}
	return bpf.ModeAuto
}

func bindMode(z config.Zerocopy) xsk.BindMode {
	switch z {
	case config.ZerocopyOn:
		return xsk.ModeZeroCopy
	case config.ZerocopyOff:
		return xsk.ModeCopy
	}
	return xsk.ModeAuto
}

func ifaceAddr(name string, v6 bool) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, err
	}
	return afxdp.InterfaceAddr(ifi, v6)
}

// engineBatch is the RX/TX batch of the daemon's engines: 128 halves the
// TX kicks of the default 64 (each a sendto that, on copy-mode veth, also
// carries the peer's receive path) for 16 KiB more descriptors in flight.
const engineBatch = 128
