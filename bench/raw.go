package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/internal/threadcpu"
	"github.com/metaroce/metaroce/wire/frame"
	"golang.org/x/sys/unix"
)

// rawBackend is one AF_XDP layer driving the four loops of a raw run. Both
// implementations (our xsk, asavie/xdp) are driven by runRaw, which owns the
// timing, the threads and the result; a backend owns its sockets and XDP
// programs on both hosts. Each loop runs on its own locked, pinned thread
// and is the only user of its host's socket while it runs.
type rawBackend interface {
	// prepareRate readies a rate run: the sink's fill ring full, every
	// frame of the blaster's UMEM holding r.tmpl's blast frame.
	prepareRate(r *rateRun) error
	// blast sends the prebuilt frames stamped 0, 1, 2, ... until
	// r.stopTX, publishing in r.sent after each batch how many the socket
	// took; then it waits, up to drainTimeout, for its TX ring to empty.
	blast(r *rateRun) error
	// sink receives until r.stopRX, verifying every frame into r.chk and
	// publishing r.chk.received in r.received after each batch.
	sink(r *rateRun) error
	// sinkCounters reads how many frames B's XDP program redirected, and
	// the drop counters of B's socket.
	sinkCounters() (redirected uint64, drops sockDrops, err error)
	// prepareLatency readies the pinger's fill ring.
	prepareLatency(l *latRun) error
	// ping sends l.n probes one at a time, each after the previous one's
	// reply (or its timeout), recording round trips in l.samples.
	ping(l *latRun) error
	// reflect turns probes around until l.stop.
	reflect(l *latRun) error
	// describe fills in how the sockets and programs were set up.
	describe(res *RawResult)
	close() error
}

// sockDrops are a receiving socket's kernel drop counters (XDP_STATISTICS).
type sockDrops struct{ fillEmpty, rxFull, other uint64 }

// newSockDrops sorts XDP_STATISTICS into drop reasons. The kernel counts a
// frame dropped for an empty fill ring in rx_dropped as well as in
// rx_fill_ring_empty_descs (measured: the two moved together), so only
// rx_dropped beyond the named reasons is "other".
func newSockDrops(fillEmpty, rxFull, rxDropped, invalid uint64) sockDrops {
	d := sockDrops{fillEmpty: fillEmpty, rxFull: rxFull, other: invalid}
	if named := fillEmpty + rxFull; rxDropped > named {
		d.other += rxDropped - named
	}
	return d
}

func (d sockDrops) total() uint64 { return d.fillEmpty + d.rxFull + d.other }

func (d sockDrops) sub(e sockDrops) sockDrops {
	return sockDrops{d.fillEmpty - e.fillEmpty, d.rxFull - e.rxFull, d.other - e.other}
}

// rateRun is the shared state of one rate run.
type rateRun struct {
	tmpl           template
	stopTX, stopRX atomic.Bool
	sent           atomic.Uint64 // written by the blaster only
	received       atomic.Uint64 // written by the sink only
	chk            seqChecker    // the sink's; read after it returned
}

// latRun is the shared state of one latency run.
type latRun struct {
	tmpl  template
	probe []byte // a whole probe frame, copied into a UMEM frame per probe
	n     int
	stop  atomic.Bool // asks ping and reflect to return
	// Owned by ping; read after it returned.
	samples []time.Duration
	lost    int
}

// rawSetup is what a backend is opened with.
type rawSetup struct {
	a, b *testnet.Host
	opts RawOptions
}

// RawAFXDP measures the raw AF_XDP ceiling with our socket layer
// (dataplane/xsk): see the package documentation. a sends, b receives and
// reflects. The hosts must be able to reach each other (a Pair, or two
// hosts of a Star); the XDP program is attached to each host's port for the
// run and detached before RawAFXDP returns. The result is returned with
// ErrSequence if frames failed verification.
func RawAFXDP(ctx context.Context, a, b *testnet.Host, opts RawOptions) (RawResult, error) {
	return runRaw(ctx, a, b, opts, "xsk", openXSK)
}

// RawAsavie is RawAFXDP with github.com/asavie/xdp v0.3.3 as the socket
// layer instead of ours, for comparison: same frames, loops, threads and XDP
// program (ours, through bpf_link; asavie's own program and its netlink
// Attach/Detach are not used). A panic inside asavie/xdp is returned as an
// error. See the package documentation for what had to be worked around.
func RawAsavie(ctx context.Context, a, b *testnet.Host, opts RawOptions) (RawResult, error) {
	return runRaw(ctx, a, b, opts, "asavie", openAsavie)
}

func runRaw(ctx context.Context, a, b *testnet.Host, opts RawOptions, name string,
	open func(rawSetup) (rawBackend, error)) (res RawResult, err error) {
	res = RawResult{Backend: name}
	opts, err = opts.withDefaults()
	if err != nil {
		return res, err
	}
	res.FrameSize, res.IPv6, res.MTU = opts.FrameSize, opts.IPv6, opts.MTU
	if a == nil || b == nil || a.Port == nil || b.Port == nil {
		return res, errors.New("bench: two hosts with ports are needed")
	}
	if err := checkMTU(a, max(opts.FrameSize, opts.ProbeSize)); err != nil {
		return res, err
	}
	tag := uint16(rand.Uint32())
	blastT, err := newTemplate(endpoints(a, b, opts), opts.FrameSize, tag)
	if err != nil {
		return res, err
	}
	probeT, err := newTemplate(endpoints(a, b, opts), opts.ProbeSize, tag)
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	be, err := open(rawSetup{a: a, b: b, opts: opts})
	if err != nil {
		return res, fmt.Errorf("bench %s: %w", name, err)
	}
	defer func() { err = errors.Join(err, be.close()) }()
	be.describe(&res)
	cpus, pin := cpuPair(opts.NoPin)
	cpuTX, cpuRX := -1, -1
	if pin {
		cpuTX, cpuRX = cpus[0], cpus[1]
	}

	pinned, err := measureRate(ctx, a, b, be, blastT, opts, cpuTX, cpuRX, &res)
	if err != nil {
		return res, fmt.Errorf("bench %s: rate run: %w", name, err)
	}
	if opts.RoundTrips > 0 {
		p, err := measureLatency(ctx, be, probeT, opts, cpuTX, cpuRX, &res)
		if err != nil {
			return res, fmt.Errorf("bench %s: latency run: %w", name, err)
		}
		pinned = pinned && p
	}
	res.Pinned = pinned
	switch {
	case pinned:
		res.CPUs = cpus[:]
	case opts.NoPin:
		res.Notes = append(res.Notes, "threads not pinned: NoPin")
	case !pin:
		res.Notes = append(res.Notes, "threads not pinned: fewer than two CPUs allowed")
	default:
		res.Notes = append(res.Notes, "threads not pinned: sched_setaffinity refused")
	}
	if !res.SeqOK {
		return res, fmt.Errorf("bench %s: %w: %d frames not of this run or torn, %d out of order",
			name, ErrSequence, res.BadFrames, res.Reordered)
	}
	if res.Received == 0 {
		return res, fmt.Errorf("bench %s: no frame arrived at %s (sent %d)", name, b.Port, res.Sent)
	}
	return res, nil
}

// measureRate runs the blaster and the sink for opts.Duration and fills the
// rate fields of res. It reports whether both threads were pinned.
func measureRate(ctx context.Context, a, b *testnet.Host, be rawBackend, t template, opts RawOptions, cpuTX, cpuRX int, res *RawResult) (bool, error) {
	r := &rateRun{tmpl: t}
	if err := be.prepareRate(r); err != nil {
		return false, err
	}
	redir0, drops0, err := be.sinkCounters()
	if err != nil {
		return false, err
	}
	eps := pathEndpoints(a, b)
	path0, err := snapshotDrops(eps)
	if err != nil {
		return false, err
	}
	warm := min(opts.Duration/10, 200*time.Millisecond)

	sinkW := startWorker(cpuRX, func() error { return be.sink(r) })
	blastW := startWorker(cpuTX, func() error { return be.blast(r) })
	stop := func() {
		r.stopTX.Store(true)
		<-blastW.done
		r.stopRX.Store(true)
		<-sinkW.done
	}
	if err := sleep(ctx, warm, blastW.done, sinkW.done); err != nil {
		stop()
		return false, errors.Join(err, blastW.err, sinkW.err)
	}
	s0, g0, t0 := r.sent.Load(), r.received.Load(), time.Now()
	tx0, rx0 := blastW.cpu(), sinkW.cpu()
	if err := sleep(ctx, opts.Duration-warm, blastW.done, sinkW.done); err != nil {
		stop()
		return false, errors.Join(err, blastW.err, sinkW.err)
	}
	s1, g1, t1 := r.sent.Load(), r.received.Load(), time.Now()
	tx1, rx1 := blastW.cpu(), sinkW.cpu()
	if tx0.Total > 0 && s1 > s0 {
		u := tx1.Sub(tx0)
		res.SenderCPUNsPerFrame, res.SenderKernelShare = float64(u.Total)/float64(s1-s0), u.KernelShare()
	}
	if rx0.Total > 0 && g1 > g0 {
		u := rx1.Sub(rx0)
		res.SinkCPUNsPerFrame, res.SinkKernelShare = float64(u.Total)/float64(g1-g0), u.KernelShare()
	}

	// Drain: the blaster empties its TX ring and returns; the sink runs on
	// until nothing has arrived for drainQuiet.
	r.stopTX.Store(true)
	<-blastW.done
	last, quiet := r.received.Load(), time.Now()
	for end := time.Now().Add(drainTimeout); time.Now().Before(end); {
		if err := sleep(ctx, 2*time.Millisecond, nil, sinkW.done); err != nil {
			break
		}
		if n := r.received.Load(); n != last {
			last, quiet = n, time.Now()
		} else if time.Since(quiet) >= drainQuiet {
			break
		}
	}
	r.stopRX.Store(true)
	<-sinkW.done
	if err := errors.Join(blastW.err, sinkW.err); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}

	el := t1.Sub(t0).Seconds()
	res.Seconds = el
	res.PPS = float64(g1-g0) / el
	res.SentPPS = float64(s1-s0) / el
	res.Gbps = res.PPS * float64(t.frameLen-t.hdrLen) * 8 / 1e9
	res.FrameGbps = res.PPS * float64(t.frameLen) * 8 / 1e9
	res.Sent = r.sent.Load()
	res.Received = r.chk.received
	res.Lost = res.Sent - min(res.Sent, res.Received)
	if res.Sent > 0 {
		res.LossRate = float64(res.Lost) / float64(res.Sent)
	}
	res.BadFrames, res.Reordered = r.chk.bad, r.chk.reorder
	res.SeqOK = r.chk.bad == 0 && r.chk.reorder == 0 && r.chk.received <= res.Sent
	redir1, drops1, err := be.sinkCounters()
	if err != nil {
		return false, err
	}
	d := drops1.sub(drops0)
	res.SinkDrops = d.total()
	res.Redirected = redir1 - redir0
	path1, err := snapshotDrops(eps)
	if err != nil {
		return false, err
	}
	if res.Lost > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf(
			"where the %d lost frames went: %d reached B's XDP program; B's socket dropped %d for an empty fill ring, %d for a full RX ring, %d otherwise; interface drops: %s",
			res.Lost, res.Redirected, d.fillEmpty, d.rxFull, d.other, orNone(path0.since(path1))))
	}
	return blastW.pinned && sinkW.pinned, nil
}

// measureLatency runs the pinger and the reflector for opts.RoundTrips probes,
// at most opts.Duration, and fills the latency fields of res.
func measureLatency(ctx context.Context, be rawBackend, t template, opts RawOptions, cpuTX, cpuRX int, res *RawResult) (bool, error) {
	l := &latRun{tmpl: t, n: opts.RoundTrips, probe: make([]byte, t.frameLen),
		samples: make([]time.Duration, 0, opts.RoundTrips)}
	if _, err := t.build(l.probe, kindProbe, 0); err != nil {
		return false, err
	}
	if err := be.prepareLatency(l); err != nil {
		return false, err
	}
	reflW := startWorker(cpuRX, func() error { return be.reflect(l) })
	pingW := startWorker(cpuTX, func() error { return be.ping(l) })
	// The pinger returns after its last probe; the reflector only when
	// told, so its ending first is a failure.
	var err error
	timer := time.NewTimer(opts.Duration)
	select {
	case <-pingW.done:
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	case <-reflW.done:
		err = errEarly
	}
	timer.Stop()
	l.stop.Store(true)
	<-pingW.done
	<-reflW.done
	if err := errors.Join(err, pingW.err, reflW.err); err != nil {
		return false, err
	}
	res.ProbeSize = t.frameLen
	res.RoundTrips, res.LatLost = len(l.samples), l.lost
	if len(l.samples) == 0 {
		return false, fmt.Errorf("no probe answered (%d lost)", l.lost)
	}
	slices.Sort(l.samples)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	res.LatP50 = us(percentile(l.samples, 0.50))
	res.LatP99 = us(percentile(l.samples, 0.99))
	res.LatMin, res.LatMax = us(l.samples[0]), us(l.samples[len(l.samples)-1])
	return pingW.pinned && reflW.pinned, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// percentile returns the q-quantile of sorted samples (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// endpoints addresses A's frames to B: from A's port to its next hop, which
// is B's port on a Pair and the switch's port on a Star (the switch then
// routes to B). B's reflector swaps the MACs, so its replies go back to the
// same hop. The UDP destination port is the one the XDP program steers; the
// source port is fixed (there is one path).
func endpoints(a, b *testnet.Host, opts RawOptions) frame.Endpoints {
	ep := frame.Endpoints{Src: a.IPv4, Dst: b.IPv4, SrcPort: 49152, DstPort: opts.Port}
	if opts.IPv6 {
		ep.Src, ep.Dst = a.IPv6, b.IPv6
	}
	copy(ep.SrcMAC[:], a.Port.MAC)
	copy(ep.DstMAC[:], a.Port.Peer.MAC)
	return ep
}

// checkMTU fails if frames of frameLen bytes do not fit A's MTU (veth drops
// them on transmit, silently).
func checkMTU(a *testnet.Host, frameLen int) error {
	var mtu int
	if err := a.Do(func() error {
		ifi, err := net.InterfaceByName(a.Port.Name)
		if err != nil {
			return err
		}
		mtu = ifi.MTU
		return nil
	}); err != nil {
		return fmt.Errorf("bench: read MTU of %s: %w", a.Port, err)
	}
	if frameLen > mtu+14 {
		return fmt.Errorf("%w: a %d-byte frame does not fit the MTU %d of %s", errFrameSize, frameLen, mtu, a.Port)
	}
	return nil
}

// worker is a loop on its own locked thread, pinned to a CPU if one is given.
type worker struct {
	done   chan struct{}
	err    error // set before done is closed
	pinned bool  // set before done is closed
	tid    atomic.Int64
}

// cpu reads the worker's thread's CPU time (zero before the thread has
// started or when it cannot be read).
func (w *worker) cpu() threadcpu.Usage {
	if tid := w.tid.Load(); tid != 0 {
		if u, err := threadcpu.Read(int(tid)); err == nil {
			return u
		}
	}
	return threadcpu.Usage{}
}

func startWorker(cpu int, fn func() error) *worker {
	w := &worker{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		unpin, pinned := lockAndPin(cpu)
		defer unpin()
		w.pinned = pinned
		w.tid.Store(int64(unix.Gettid()))
		w.err = protect(fn)
	}()
	return w
}

// protect runs fn and turns a panic into an error: asavie/xdp panics on
// errors it does not expect, and a benchmark must not take the process
// down with it.
func protect(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

// errEarly: a worker returned before it was told to stop, which only an
// error makes it do.
var errEarly = errors.New("bench: a worker stopped before its time")

// sleep waits for d. It returns nil when d passed, ctx's error when ctx
// ended first, and errEarly when w1 or w2 (either may be nil) closed first.
func sleep(ctx context.Context, d time.Duration, w1, w2 <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w1:
		return errEarly
	case <-w2:
		return errEarly
	}
}
