package telemetry

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
	"github.com/metaroce/metaroce/wire/frame"
)

// Collector is a prometheus.Collector over running engines: each Collect
// takes one Snapshot (bounded by Timeout) and turns it into constant
// metrics, so nothing is kept between scrapes and nothing is counted twice.
type Collector struct {
	engines []Engine
	opts    Options
	// Timeout bounds one scrape's wait for the engines (default 500 ms,
	// well inside Prometheus' default 10 s scrape timeout; an engine
	// answers within its MaxSleep, 1 ms, unless it is stuck).
	Timeout time.Duration
	build   prometheus.Metric
}

// NewCollector returns a collector over engines. Its series are per
// engine and interface only, so their number is fixed by the engines
// whatever the connections; opts.TopConns and opts.Paths are ignored (no
// per-connection or per-path series: the package doc says why).
func NewCollector(engines []Engine, opts Options) *Collector {
	opts.TopConns, opts.Paths = -1, false
	version, revision := buildVersion()
	return &Collector{engines: engines, opts: opts, Timeout: 500 * time.Millisecond,
		build: prometheus.MustNewConstMetric(buildInfo, prometheus.GaugeValue, 1, version, revision, runtime.Version())}
}

// buildVersion returns the main module's version and VCS revision from the
// binary's build information ("unknown" where the build recorded none).
func buildVersion() (version, revision string) {
	version, revision = "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if v := bi.Main.Version; v != "" {
		version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			revision = s.Value
		}
	}
	return
}

// Describe sends every descriptor the collector may use.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect takes a snapshot and sends it as metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	s := Take(ctx, c.engines, c.opts)
	ch <- c.build
	for i := range s.Engines {
		collectEngine(ch, &s.Engines[i])
	}
	for _, is := range s.Ifaces {
		if x := is.XDP; x != nil {
			counter(ch, xdpRedirected, x.Redirected, is.Name)
			counter(ch, xdpPassed, x.Passed, is.Name)
			counter(ch, xdpRedirectFailed, x.RedirectFailed, is.Name)
			counter(ch, xdpDropped, x.DroppedShort, is.Name, "short")
			counter(ch, xdpDropped, x.DroppedVersion, is.Name, "version")
			counter(ch, xdpDropped, x.DroppedFragment, is.Name, "fragment")
		}
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

func collectEngine(ch chan<- prometheus.Metric, e *EngineSnapshot) {
	q := strconv.Itoa(e.Queue)
	l := []string{e.Iface, q}
	with := func(extra ...string) []string { return append(append(make([]string, 0, 4), l...), extra...) }
	gauge(ch, engineInfo, 1, with(e.Link.Backend, e.Link.XDPMode, strconv.FormatBool(e.Link.ZeroCopy))...)
	ec := &e.Engine
	counter(ch, engineIterations, ec.Iterations, l...)
	counter(ch, engineSleeps, ec.Sleeps, l...)
	ch <- prometheus.MustNewConstMetric(engineBusy, prometheus.CounterValue, seconds(ec.BusyNanos), l...)
	ch <- prometheus.MustNewConstMetric(engineIdle, prometheus.CounterValue, seconds(ec.IdleNanos), l...)
	if c := ec.CPU; c != nil {
		ch <- prometheus.MustNewConstMetric(engineCPU, prometheus.CounterValue, seconds(c.UserNanos), with("user")...)
		ch <- prometheus.MustNewConstMetric(engineCPU, prometheus.CounterValue, seconds(c.SysNanos), with("system")...)
	}
	counter(ch, linkRxPackets, ec.RxPackets, l...)
	counter(ch, linkTxPackets, ec.TxPackets, l...)
	counter(ch, linkRxBatches, ec.RxBatches, l...)
	counter(ch, linkTxBatches, ec.TxBatches, l...)
	counter(ch, linkTxShort, ec.TxShort, l...)
	counter(ch, linkRxStamped, ec.RxStamped, l...)
	ch <- prometheus.MustNewConstMetric(linkRxWait, prometheus.CounterValue, seconds(ec.RxWaitNanos), l...)
	counter(ch, handoffSent, ec.Forwarded, l...)
	counter(ch, handoffReceived, ec.FromPeers, l...)
	if u := e.UDP; u != nil {
		counter(ch, linkRxDropped, u.Truncated, with("truncated")...)
		counter(ch, linkRxDropped, u.RecvErrors, with("recv_error")...)
		counter(ch, linkTxDropped, u.SendErrors, with("send_error")...)
		counter(ch, linkTxDropped, u.SendFull, with("socket_full")...)
	}
	for i := range e.Planes {
		p := &e.Planes[i]
		pl := with(strconv.Itoa(p.Plane))
		at := func(extra ...string) []string { return append(append(make([]string, 0, 5), pl...), extra...) }
		gauge(ch, planeInfo, 1, at(p.Iface)...)
		if u := p.UDP; u != nil {
			counter(ch, planeRxFrames, u.Received, pl...)
			counter(ch, planeTxFrames, u.Sent, pl...)
			counter(ch, planeRxDropped, u.Truncated, at("truncated")...)
			counter(ch, planeRxDropped, u.RecvErrors, at("recv_error")...)
			counter(ch, planeTxDropped, u.SendErrors, at("send_error")...)
			counter(ch, planeTxDropped, u.SendFull, at("socket_full")...)
		}
		if x := p.XSK; x != nil {
			counter(ch, planeXSKDropped, x.RxDropped, at("other")...)
			counter(ch, planeXSKDropped, x.RxInvalidDescs, at("invalid_desc")...)
			counter(ch, planeXSKDropped, x.RxRingFull, at("rx_ring_full")...)
			counter(ch, planeXSKDropped, x.RxFillRingEmptyDescs, at("fill_ring_empty")...)
			counter(ch, planeXSKInvalid, x.TxInvalidDescs, pl...)
		}
	}
	if x := e.XSK; x != nil {
		counter(ch, xskRxDropped, x.RxDropped, with("other")...)
		counter(ch, xskRxDropped, x.RxInvalidDescs, with("invalid_desc")...)
		counter(ch, xskRxDropped, x.RxRingFull, with("rx_ring_full")...)
		counter(ch, xskRxDropped, x.RxFillRingEmptyDescs, with("fill_ring_empty")...)
		counter(ch, xskTxInvalid, x.TxInvalidDescs, l...)
	}
	responsive := 0.0
	if e.Responsive {
		responsive = 1
	}
	gauge(ch, engineResponsive, responsive, l...)
	if !e.Responsive {
		return
	}
	if a := e.AFXDP; a != nil {
		for r := 1; r < frame.NumReasons; r++ {
			counter(ch, linkRxDropped, a.RxBadFrame[r], with(frame.Reason(r).Name())...)
		}
		counter(ch, linkRxDropped, a.RxNotForUs, with("not_for_us")...)
		counter(ch, linkRxDropped, a.RxMultiBuffer, with("multi_buffer")...)
		counter(ch, linkTxDropped, a.TxNoNeighbor, with("no_neighbor")...)
		counter(ch, linkTxDropped, a.TxFamily, with("wrong_family")...)
		counter(ch, linkTxDropped, a.TxRingFull, with("tx_ring_full")...)
	}
	collectPlanes(ch, e, l)
	gauge(ch, snapshotStall, e.Stall.Seconds(), l...)
	t := &e.Transport
	counter(ch, rxPackets, t.RxPackets, l...)
	counter(ch, rxBytes, t.RxBytes, l...)
	counter(ch, txPackets, t.TxPackets, l...)
	counter(ch, txBytes, t.TxBytes, l...)
	for r := 1; r < wire.NumReasons; r++ {
		counter(ch, rxDropped, t.RxMalformed[r], with(wire.ReasonName(r))...)
	}
	counter(ch, rxDropped, t.RxUnknownConn, with("unknown_connection")...)
	counter(ch, rxDropped, t.RxWrongPeer, with("wrong_peer")...)
	counter(ch, rxDropped, t.RxBadPath, with("bad_path")...)
	counter(ch, rxDropped, t.RxBogusAck, with("bogus_ack")...)
	counter(ch, rxDropped, t.RxUnexpected, with("unexpected_state")...)
	counter(ch, rxDropped, t.OutOfWindow, with("out_of_window")...)
	counter(ch, rxDropped, t.OutOfOrderDropped, with("out_of_order")...)
	counter(ch, dataSent, t.DataSent, l...)
	counter(ch, dataRetransmitted, t.DataRetransmitted, l...)
	counter(ch, dataReceived, t.DataReceived, l...)
	counter(ch, placedBytes, t.BytesPlaced, l...)
	counter(ch, duplicates, t.Duplicates, l...)
	counter(ch, acksSent, t.AcksSent, l...)
	counter(ch, acksReceived, t.AcksReceived, l...)
	for r := 1; r < len(t.NacksSent); r++ {
		name := wire.NackReason(r).String()
		if t.NacksSent[r]+t.NacksReceived[r] == 0 && len(name) > 5 && name[:5] == "NACK_" {
			continue // a reason the protocol does not define
		}
		counter(ch, nacksSent, t.NacksSent[r], with(name)...)
		counter(ch, nacksReceived, t.NacksReceived[r], with(name)...)
	}
	counter(ch, lossesDetected, t.LostDetected, l...)
	counter(ch, rtoTimeouts, t.Timeouts, l...)
	counter(ch, tailProbes, t.TailProbes, l...)
	counter(ch, spuriousRetx, t.SpuriousRetx, l...)
	counter(ch, rnrWaits, t.RNRWaits, l...)
	counter(ch, voidSent, t.VoidSent, l...)
	counter(ch, voidReceived, t.VoidReceived, l...)
	counter(ch, holesRepaired, t.HolesRepaired, l...)
	counter(ch, repairVoidsSent, t.RepairVoidsSent, l...)
	counter(ch, pathsSuspected, t.PathsSuspected, l...)
	counter(ch, pathsRestored, t.PathsRestored, l...)
	counter(ch, planesDown, t.PlanesDown, l...)
	counter(ch, planesUp, t.PlanesUp, l...)
	counter(ch, planesUnproven, t.PlanesUnproven, l...)
	counter(ch, planesProven, t.PlanesProven, l...)
	counter(ch, repaths, t.PathsRetired, l...)
	counter(ch, pathTimeouts, t.PathTimeouts, l...)
	counter(ch, pathsSlow, t.PathsSlow, l...)
	counter(ch, probesSent, t.ProbesSent, l...)
	counter(ch, probesReceived, t.ProbesReceived, l...)
	counter(ch, ceReceived, t.RxCE, l...)
	counter(ch, ceEchoed, t.CEEchoed, l...)
	counter(ch, connsAccepted, t.ConnsAccepted, l...)
	counter(ch, connsFailed, t.ConnsFailed, l...)
	counter(ch, connsClosed, t.ConnsClosed, l...)
	counter(ch, msgsCompleted, t.MessagesCompleted, l...)
	counter(ch, msgsFailed, t.MessagesFailed, l...)
	counter(ch, recvCompleted, t.RecvCompleted, l...)
	ch <- histogram(rttHist, &t.RTT, l)
	for st := transport.StateConnecting; st <= transport.StateFailed; st++ {
		gauge(ch, connections, float64(e.Conns.ByState[st]), with(st.String())...)
	}
	gauge(ch, paths, float64(e.Conns.PathsActive), with("active")...)
	gauge(ch, paths, float64(e.Conns.PathsSuspect), with("suspect")...)
	gauge(ch, connsDegraded, float64(e.Conns.Degraded), l...)
	gauge(ch, connSRTTMax, seconds(uint64(e.Conns.SRTTMax)), l...)
	gauge(ch, connHostDelayMax, seconds(uint64(e.Conns.HostDelayMax)), l...)
	gauge(ch, connFabricRTTMax, seconds(uint64(e.Conns.FabricRTTMax)), l...)
	gauge(ch, ccConns, float64(e.Conns.CCConns), l...)
	if e.Conns.CCConns > 0 {
		gauge(ch, ccWindowMin, float64(e.Conns.CCWindowMin), l...)
	}
	gauge(ch, ccPacingMin, float64(e.Conns.CCPacingMinBPS)/8, l...)
	gauge(ch, planesDownNow, float64(e.Conns.PlanesDown), l...)
}

// histogram converts a transport.Histogram (nanoseconds, per-bucket
// counts) to a Prometheus histogram (seconds, cumulative counts).
func histogram(d *prometheus.Desc, h *transport.Histogram, labels []string) prometheus.Metric {
	buckets := make(map[float64]uint64, transport.HistogramBuckets)
	var cum uint64
	for i := 0; i < transport.HistogramBuckets; i++ {
		cum += h.Counts[i]
		buckets[transport.BucketBound(i).Seconds()] = cum
	}
	cum += h.Counts[transport.HistogramBuckets]
	return prometheus.MustNewConstHistogram(d, cum, seconds(h.Sum), buckets, labels...)
}

// collectPlanes sends the engine-owned per-plane counters (the AF_XDP
// links' own, and the PlaneLink's copies) of a responsive engine over
// several planes.
func collectPlanes(ch chan<- prometheus.Metric, e *EngineSnapshot, l []string) {
	if len(e.Planes) == 0 {
		return
	}
	counter(ch, planeCopied, e.PlaneCopied, l...)
	counter(ch, planeCopyDropped, e.PlaneCopyDrops, l...)
	for i := range e.Planes {
		p := &e.Planes[i]
		a := p.AFXDP
		if a == nil {
			continue
		}
		pl := append(append(make([]string, 0, 4), l...), strconv.Itoa(p.Plane))
		at := func(r string) []string { return append(append(make([]string, 0, 4), pl...), r) }
		counter(ch, planeRxFrames, a.RxFrames, pl...)
		counter(ch, planeTxFrames, a.TxFrames, pl...)
		for r := 1; r < frame.NumReasons; r++ {
			counter(ch, planeRxDropped, a.RxBadFrame[r], at(frame.Reason(r).Name())...)
		}
		counter(ch, planeRxDropped, a.RxNotForUs, at("not_for_us")...)
		counter(ch, planeRxDropped, a.RxMultiBuffer, at("multi_buffer")...)
		counter(ch, planeTxDropped, a.TxNoNeighbor, at("no_neighbor")...)
		counter(ch, planeTxDropped, a.TxFamily, at("wrong_family")...)
		counter(ch, planeTxDropped, a.TxRingFull, at("tx_ring_full")...)
	}
}
