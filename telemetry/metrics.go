package telemetry

import "github.com/prometheus/client_golang/prometheus"

// The metric descriptors. Names follow Prometheus' conventions: the
// metaroce_ prefix, _total on counters, base units (seconds, bytes).
// Labels: iface and queue name an engine (one per NIC queue); reason,
// state and the like take values from fixed sets. No label names a
// connection, a peer or a path: their number, and their churn as
// connections come and go, would grow the series without bound (see the
// package doc); per-connection detail is in the live views.

var allDescs []*prometheus.Desc

func desc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc("metaroce_"+name, help, labels, nil)
	allDescs = append(allDescs, d)
	return d
}

var eng = []string{"iface", "queue"}

func engL(extra ...string) []string { return append(append([]string{}, eng...), extra...) }

var (
	buildInfo = desc("build_info", "Build of the running daemon; always 1.", "version", "revision", "goversion")

	engineInfo       = desc("engine_info", "One engine per NIC queue and how it reaches the wire; always 1.", engL("backend", "xdp_mode", "zerocopy")...)
	engineResponsive = desc("engine_responsive", "1 if the engine answered this scrape in time; 0 leaves its engine-owned metrics out of the scrape.", eng...)
	snapshotStall    = desc("engine_snapshot_stall_seconds", "Longest time this scrape's snapshot held the engine goroutine in one visit (its cost to the dataplane).", eng...)
	engineIterations = desc("engine_iterations_total", "Engine loop iterations.", eng...)
	engineSleeps     = desc("engine_sleeps_total", "Times the idle engine blocked waiting for packets or a timer.", eng...)
	engineBusy       = desc("engine_busy_seconds_total", "Time the engine spent in iterations that found work.", eng...)
	engineCPU        = desc("engine_cpu_seconds_total", "CPU time of the engine's thread, by mode: user (its polling and transport work) or system (the kernel's, inside its system calls; on copy-mode AF_XDP over veth that includes the receiving side's path).", engL("mode")...)
	engineIdle       = desc("engine_idle_seconds_total", "Time the engine spent spinning or blocked without work.", eng...)

	linkRxPackets   = desc("link_rx_packets_total", "Packets the engine took from its link (its NIC queue or socket).", eng...)
	linkTxPackets   = desc("link_tx_packets_total", "Packets the engine handed to its link.", eng...)
	linkRxBatches   = desc("link_rx_batches_total", "Non-empty receive batches.", eng...)
	linkTxBatches   = desc("link_tx_batches_total", "Non-empty transmit batches.", eng...)
	linkTxShort     = desc("link_tx_short_total", "Times the transport had more to send than the link had room for.", eng...)
	linkRxStamped   = desc("link_rx_stamped_packets_total", "Received packets that carried the link's arrival time (the XDP program's stamp).", eng...)
	linkRxWait      = desc("link_rx_wait_seconds_total", "Summed time stamped packets waited between arrival and the engine: host receive delay.", eng...)
	linkRxDropped   = desc("link_rx_dropped_total", "Frames the link dropped before the transport, by reason.", engL("reason")...)
	linkTxDropped   = desc("link_tx_dropped_total", "Packets the link could not send, by reason.", engL("reason")...)
	handoffSent     = desc("engine_handoff_sent_total", "Packets handed to the engine that owns their connection (RSS put them on this queue).", eng...)
	handoffReceived = desc("engine_handoff_received_total", "Packets other engines handed to this one.", eng...)
	xskRxDropped    = desc("xsk_rx_dropped_total", "Frames the kernel dropped at the AF_XDP socket (XDP_STATISTICS), by reason.", engL("reason")...)
	xskTxInvalid    = desc("xsk_tx_invalid_descs_total", "TX descriptors the kernel rejected (XDP_STATISTICS).", eng...)

	// Per plane, for an engine over several (docs/spec.md §7.9): plane is
	// 0..7, so these add at most eight series per engine and reason.
	planeInfo        = desc("plane_info", "The engine's link on one plane: its interface; always 1.", engL("plane", "plane_iface")...)
	planeRxFrames    = desc("plane_link_rx_packets_total", "Packets the engine's link on the plane received (AF_XDP frames parsed, or UDP datagrams).", engL("plane")...)
	planeTxFrames    = desc("plane_link_tx_packets_total", "Packets the engine's link on the plane sent.", engL("plane")...)
	planeRxDropped   = desc("plane_link_rx_dropped_total", "Frames the engine's link on the plane dropped before the transport, by reason.", engL("plane", "reason")...)
	planeTxDropped   = desc("plane_link_tx_dropped_total", "Packets the engine's link on the plane could not send, by reason.", engL("plane", "reason")...)
	planeXSKDropped  = desc("plane_xsk_rx_dropped_total", "Frames the kernel dropped at the plane's AF_XDP socket (XDP_STATISTICS), by reason.", engL("plane", "reason")...)
	planeXSKInvalid  = desc("plane_xsk_tx_invalid_descs_total", "TX descriptors the kernel rejected at the plane's AF_XDP socket.", engL("plane")...)
	planeCopied      = desc("plane_copied_total", "Packets written into one plane's transmit buffer and copied to their own plane's link.", eng...)
	planeCopyDropped = desc("plane_copy_dropped_total", "Packets for another plane that its link had no room for (a loss the transport recovers).", eng...)

	xdpRedirected     = desc("xdp_redirected_total", "MetaRoCE packets the XDP program steered to an AF_XDP socket.", "iface")
	xdpPassed         = desc("xdp_passed_total", "Packets the XDP program passed to the kernel as not MetaRoCE.", "iface")
	xdpRedirectFailed = desc("xdp_redirect_failed_total", "MetaRoCE packets whose queue had no socket; passed to the kernel.", "iface")
	xdpDropped        = desc("xdp_dropped_total", "Packets to the MetaRoCE port the XDP program dropped, by reason.", "iface", "reason")

	rxPackets         = desc("rx_packets_total", "Transport packets received (UDP payloads handed to the transport).", eng...)
	rxBytes           = desc("rx_bytes_total", "Transport bytes received (UDP payload).", eng...)
	txPackets         = desc("tx_packets_total", "Transport packets sent.", eng...)
	txBytes           = desc("tx_bytes_total", "Transport bytes sent (UDP payload).", eng...)
	rxDropped         = desc("rx_dropped_total", "Packets the transport dropped, by reason.", engL("reason")...)
	dataSent          = desc("data_packets_sent_total", "Data packets sent, retransmissions included.", eng...)
	dataRetransmitted = desc("data_packets_retransmitted_total", "Data packets sent again.", eng...)
	dataReceived      = desc("data_packets_received_total", "Data packets received.", eng...)
	placedBytes       = desc("placed_bytes_total", "Payload bytes placed into registered memory.", eng...)
	duplicates        = desc("duplicate_packets_total", "Data packets received twice.", eng...)
	acksSent          = desc("acks_sent_total", "Acks sent.", eng...)
	acksReceived      = desc("acks_received_total", "Acks received.", eng...)
	nacksSent         = desc("nacks_sent_total", "NACKs sent, by reason.", engL("reason")...)
	nacksReceived     = desc("nacks_received_total", "NACKs received, by reason.", engL("reason")...)
	lossesDetected    = desc("losses_detected_total", "Transmissions found lost from a path's selective acks.", eng...)
	rtoTimeouts       = desc("rto_timeouts_total", "Retransmission timeouts.", eng...)
	tailProbes        = desc("tail_probes_total", "Tail loss probes sent.", eng...)
	spuriousRetx      = desc("spurious_retransmits_total", "Retransmissions of data the peer had already received.", eng...)
	rnrWaits          = desc("rnr_waits_total", "Waits after a receiver-not-ready NACK.", eng...)
	voidSent          = desc("void_sent_total", "VOID packets sent (PSNs abandoned after a failing NACK).", eng...)
	voidReceived      = desc("void_received_total", "VOID packets received.", eng...)
	holesRepaired     = desc("holes_repaired_total", "Holes a peer's ack proved (PSNs held delivered after a forged ack that the peer lacks) and voided (spec §8.10).", eng...)
	repairVoidsSent   = desc("repair_voids_sent_total", "VOID packets sent to repair such holes.", eng...)
	pathsSuspected    = desc("paths_suspected_total", "Paths that became suspect (losses, timeout or slowness).", eng...)
	pathsRestored     = desc("paths_restored_total", "Suspect paths restored by answered probes.", eng...)
	planesDown        = desc("planes_down_total", "Connections' planes that went down: every path on the plane suspect.", eng...)
	planesUp          = desc("planes_up_total", "Connections' planes that came back: a path on the plane restored.", eng...)
	planesDownNow     = desc("planes_down", "Connections' planes down now, unproven ones included.", eng...)
	planesUnproven    = desc("planes_unproven_total", "Connections' planes other than plane 0, which start unproven: used only once the peer answers probes from its address there.", eng...)
	planesProven      = desc("planes_proven_total", "Connections' unproven planes the peer answered on: in use.", eng...)
	repaths           = desc("repaths_total", "Paths retired and given a fresh entropy value.", eng...)
	pathTimeouts      = desc("path_timeouts_total", "Paths found silent while holding data.", eng...)
	pathsSlow         = desc("paths_slow_total", "Paths suspected for an RTT far above the median.", eng...)
	probesSent        = desc("probes_sent_total", "PROBE packets sent on suspect paths.", eng...)
	probesReceived    = desc("probes_received_total", "PROBE packets received.", eng...)
	ceReceived        = desc("ce_marked_packets_received_total", "Data packets that arrived with an ECN CE mark.", eng...)
	ceEchoed          = desc("ce_marks_echoed_total", "CE marks the peers' acks reported for our data.", eng...)
	connsAccepted     = desc("connections_accepted_total", "Connections accepted from peers.", eng...)
	connsFailed       = desc("connections_failed_total", "Connections that failed.", eng...)
	connsClosed       = desc("connections_closed_total", "Connections closed in order.", eng...)
	msgsCompleted     = desc("messages_completed_total", "Messages (work requests) completed.", eng...)
	msgsFailed        = desc("messages_failed_total", "Messages completed with an error.", eng...)
	recvCompleted     = desc("receives_completed_total", "Receive completions.", eng...)
	rttHist           = desc("rtt_seconds", "RTT samples from acks, all connections and paths.", eng...)
	connections       = desc("connections", "Connections by state.", engL("state")...)
	paths             = desc("paths", "Logical paths of all connections, by state.", engL("state")...)

	connsDegraded    = desc("connections_degraded", "Established connections with at least one path not active (which ones: metaroce paths).", eng...)
	connSRTTMax      = desc("connection_srtt_max_seconds", "Largest smoothed RTT among the engine's established connections (which one: metaroce qps).", eng...)
	connHostDelayMax = desc("connection_host_delay_max_seconds", "Largest smoothed host delay (the peer's hold and this host's receive wait) among the engine's established connections.", eng...)
	connFabricRTTMax = desc("connection_fabric_rtt_max_seconds", "Largest fabric RTT (the congestion controller's RTT, host delay left out) among the engine's established connections.", eng...)
	ccConns          = desc("cc_connections", "Established connections with a congestion controller (0 when the daemon runs congestion: none).", eng...)
	ccWindowMin      = desc("cc_window_min_bytes", "Smallest congestion window among the engine's established connections with a controller (which one: metaroce qps).", eng...)
	ccPacingMin      = desc("cc_pacing_rate_min_bytes_per_second", "Slowest pacing rate (bytes per second) among the engine's paced established connections; 0 when none is paced.", eng...)
)
