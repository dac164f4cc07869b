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
	// planes: the engine's link on each plane (one entry without
	// plane_interfaces); planeXDP: the interfaces of planes 1.. that the
	// first engine closes, as xdp does plane 0's.
	planes   []planeEngine
	planeXDP []*afxdp.Iface
}

// planeEngine is an engine's part of one plane: its interface, address and
// link there, for telemetry.
type planeEngine struct {
	plane int
	iface string
	local netip.Addr
	link  dataplane.Link
	prog  *bpf.Program
	afx   *afxdp.Link
	udp   *udplink.Link
}

// Daemon is a running metaroced.
type Daemon struct {
	// ctl is the control server, set once it serves; the daemon's own
	// ops ask it whose connections are whose.
	ctl     *control.Server
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
	opened := func(ens []*engine) {
		d.engines = append(d.engines, ens...)
		for _, en := range ens {
			inf := en.link.Info()
			log.Info("engine up", "iface", en.iface, "queue", inf.Queue, "backend", inf.Backend,
				"xdp_mode", inf.XDPMode, "zerocopy", inf.ZeroCopy, "local", en.local, "planes", len(en.planes), "why", inf.Why)
		}
	}
	if cfg.PlaneInterfaces {
		ens, err := d.openPlanes(opts)
		if err != nil {
			return err
		}
		opened(ens)
	} else {
		for _, ic := range cfg.Interfaces {
			ens, err := d.open(ic, opts)
			if err != nil {
				return err
			}
			opened(ens)
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

// ifaceLinks is what one interface opened: its links (one per queue on
// AF_XDP, one for the UDP backend), its address, and the objects that own
// them.
type ifaceLinks struct {
	name  string
	links []dataplane.Link
	local netip.Addr
	fi    *afxdp.Iface  // the AF_XDP interface, nil for UDP
	ul    *udplink.Link // the UDP link, nil for AF_XDP
}

// close closes what openLinks opened.
func (il *ifaceLinks) close() {
	if il.fi != nil {
		il.fi.Close()
		return
	}
	for _, l := range il.links {
		l.Close()
	}
}

// openLinks opens ic's links on the configured backend.
func (d *Daemon) openLinks(ic config.Interface, opts Options) (*ifaceLinks, error) {
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
	return &ifaceLinks{name: ic.Name, links: links, local: local, fi: fi, ul: ul}, nil
}

func (d *Daemon) open(ic config.Interface, opts Options) ([]*engine, error) {
	il, err := d.openLinks(ic, opts)
	if err != nil {
		return nil, err
	}
	return d.buildEngines(ic.Name, []*ifaceLinks{il}, opts)
}

// openPlanes opens every configured interface as a plane of one endpoint
// (plane_interfaces, docs/spec.md §7.9): engine q serves queue q of every
// plane through a dataplane.PlaneLink, and its endpoint knows its address
// on each plane.
func (d *Daemon) openPlanes(opts Options) ([]*engine, error) {
	var planes []*ifaceLinks
	names := make([]string, 0, len(d.cfg.Interfaces))
	for _, ic := range d.cfg.Interfaces {
		il, err := d.openLinks(ic, opts)
		if err != nil {
			for _, p := range planes {
				p.close()
			}
			return nil, err
		}
		if len(planes) > 0 && (len(il.links) != len(planes[0].links) || (il.fi == nil) != (planes[0].fi == nil)) {
			il.close()
			for _, p := range planes {
				p.close()
			}
			return nil, fmt.Errorf("plane %d (%s): backend or engine count differs from plane 0's (%s): planes must match", len(planes), ic.Name, planes[0].name)
		}
		planes = append(planes, il)
		names = append(names, ic.Name)
	}
	return d.buildEngines(strings.Join(names, "+"), planes, opts)
}

// buildEngines builds one engine per queue over the planes' links (one plane:
// the interface's own links).
func (d *Daemon) buildEngines(name string, planes []*ifaceLinks, opts Options) ([]*engine, error) {
	var ens []*engine
	fail := func(err error) ([]*engine, error) {
		for _, p := range planes {
			p.close()
		}
		return nil, err
	}
	p0 := planes[0]
	addrs := make([]netip.Addr, len(planes))
	for p, il := range planes {
		addrs[p] = il.local
	}
	for i := range p0.links {
		tc := d.cfg.TransportConfig()
		tc.Port = uint16(d.cfg.Port)
		tc.MTU = d.cfg.MTU
		tc.Congestion = d.cfg.Congestion
		if p0.ul != nil {
			udpEntropy(&tc, p0.ul) // udpentropy.go
		}
		if len(p0.links) > 1 {
			tc.IDMask, tc.IDTag = dataplane.IDMask(len(p0.links)), uint32(i)
		}
		l := p0.links[i]
		for _, il := range planes {
			if err := checkLinkMTU(il.name, il.links[i], &tc); err != nil {
				return fail(err)
			}
		}
		if len(planes) > 1 {
			pls := make([]dataplane.Link, len(planes))
			for p, il := range planes {
				pls[p] = il.links[i]
			}
			pl, err := dataplane.NewPlaneLink(pls, engineBatch)
			if err != nil {
				return fail(err)
			}
			l = pl
		}
		ep, err := transport.NewEndpoint(tc, p0.local)
		if err != nil {
			return fail(err)
		}
		if len(planes) > 1 {
			if err := ep.SetPlaneAddrs(addrs); err != nil {
				return fail(fmt.Errorf("planes %s: %w", name, err))
			}
		}
		en := &engine{iface: name, link: l, ep: ep, local: p0.local}
		if en.ctl, err = control.NewEngineDriver(nil); err != nil {
			return nil, err
		}
		if i == 0 {
			en.xdp = p0.fi // closes every link of the interface
			for _, il := range planes[1:] {
				if il.fi != nil {
					en.planeXDP = append(en.planeXDP, il.fi)
				}
			}
		}
		if p0.fi != nil {
			en.prog, en.afx = p0.fi.Program, p0.fi.Links[i]
		} else if w, ok := p0.links[i].(*whyLink); ok {
			en.udp = w.Link
		}
		for p, il := range planes {
			pe := planeEngine{plane: p, iface: il.name, local: il.local, link: il.links[i]}
			if il.fi != nil {
				pe.prog, pe.afx = il.fi.Program, il.fi.Links[i]
			} else if w, ok := il.links[i].(*whyLink); ok {
				pe.udp = w.Link
			}
			en.planes = append(en.planes, pe)
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
		if pl, ok := en.link.(*dataplane.PlaneLink); ok && en.afxdp() {
			pl.ClosePoll() // the interfaces close the sockets
		}
		for _, x := range en.planeXDP {
			x.Close()
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
