// Package telemetry reads what the dataplane counts and serves it: a
// Prometheus collector, and snapshots for the control socket's live stream
// and the metaroce CLI.
//
// # Read, never pushed
//
// The dataplane owns its counters and never imports client_golang. Nothing
// here runs per packet: a scrape (or a stream tick) takes one Snapshot,
// which reads
//
//   - the engines' own counters (dataplane.EngineStats: single-writer
//     atomics) directly, from any goroutine;
//   - what the engine goroutine owns as plain fields (the transport's
//     Stats, the AF_XDP link's drop counters, the connections and their
//     paths) inside closures that Engine.Do runs on the engine goroutine
//     between two loop iterations, bounded by the caller's context: an
//     engine that does not answer in time is reported as unresponsive and
//     its engine-owned figures are left out of that scrape, never read
//     racily;
//   - the kernel's counters (XDP_STATISTICS of each AF_XDP socket, the XDP
//     program's per-CPU counter map, summed over CPUs) with one syscall
//     each, on the scraping goroutine.
//
// The closures write into a snapshot allocated for that call only, so if
// the caller gives up waiting and a closure still runs later, it writes
// into memory nobody reads.
//
// # What a scrape costs the dataplane
//
// Reading a connection misses the cache (~500 ns each, measured with 10k
// connections), so the walk is split: one visit copies the counters and
// the connection pointers (a pass over the map alone), then each visit
// reads 1024 connections, and a last one details the top connections.
// With 10k connections a scrape held the engine for at most 0.58 ms at a
// time instead of 3-5 ms at once (BenchmarkSnapshot); the longest hold of
// each scrape is exported as metaroce_engine_snapshot_stall_seconds.
//
// # Bounded label cardinality
//
// A host may hold tens of thousands of connections with up to 256 paths
// each, and a path's identity (its entropy value) changes on every repath,
// so a series per connection or per path would grow without bound and
// churn. Even a top-N by bytes does: each connection that enters the top
// is a new series to Prometheus, so a host whose short-lived connections
// take turns there leaves tens of thousands of series behind in a day.
// The collector therefore names no connection, peer or path; it exports
//
//   - per engine (interface, queue): every counter, drops by a fixed set of
//     reasons, connections counted by state, paths counted by state (active,
//     suspect) over all connections, the RTT histogram of all acks, and a
//     summary of the established connections: how many have a path not
//     active, the largest smoothed RTT, fabric RTT and host delay among
//     them, and of their congestion controllers how many run, the
//     smallest window and the slowest pacing rate (each connection's
//     controller, window, rate and CE marks: metaroce qps);
//   - per engine and plane (an engine over several planes, docs/spec.md
//     §7.9): its link's packets and drops on each plane and the plane's
//     AF_XDP socket drops; plane is 0..7, so this adds at most eight
//     series per engine and reason;
//   - per interface: the XDP program's counters.
//
// So the series count is fixed by the engines whatever the load
// (TestSeriesDoNotGrowWithConnections). Per-connection and per-path
// detail is in the live stream (the control socket's watch op: metaroce
// status -json, qps, paths and top), which is read while someone looks
// and costs nothing otherwise: Snapshot.Top lists the busiest connections
// (Options.TopConns, by bytes since each opened), each with its counters,
// RTTs, path summary and congestion state, and their paths on request.
//
// The walk over connections is O(conns) with O(1) work each
// (Conn.PathCounts reads the sender's active list, Conn.Stats copies a
// few words), and only the listed connections' paths are visited. The
// ranking is by bytes since each connection opened, so a long-lived
// connection that went quiet can keep its place; the per-engine totals and
// rates are exact regardless.
package telemetry
