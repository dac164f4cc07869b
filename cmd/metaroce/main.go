// Command metaroce is the MetaRoCE command-line tool: the fabric simulator
// today; status, telemetry, benchmarks, the namespace demo and the
// compliance suite as they land.
package main

import (
	"fmt"
	"os"

	"github.com/metaroce/metaroce/internal/daemon"
)

const usage = `usage: metaroce <command> [flags]

commands:
  sim     run a scenario on the virtual-time fabric simulator
  demo    two metaroced daemons in network namespaces: bandwidth, latency, baselines (root)
  perf    perftest-style benchmarks through metaroced: write-bw, write-lat, read-bw, send-lat
  status  the daemon's engines: backend, connections, packets, drops, busy time
  qps     the daemon's connections (queue pairs), busiest first
  paths   each connection's logical paths: state, RTT, marks, losses, repaths
  top     a live view of engines and connections, refreshed in place
  compliance  the packet-level conformance suite against -target ADDR or a -spawned metaroced

Run 'metaroce <command> -h' for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "sim":
		err = runSim(os.Args[2:], os.Stdout)
	case "demo":
		err = runDemo(os.Args[2:], os.Stdout)
	case "perf":
		err = runPerf(os.Args[2:], os.Stdout)
	case "status":
		err = runStatus(os.Args[2:], os.Stdout)
	case "qps":
		err = runQPs(os.Args[2:], os.Stdout)
	case "paths":
		err = runPaths(os.Args[2:], os.Stdout)
	case "top":
		err = runTop(os.Args[2:], os.Stdout)
	case "compliance":
		err = runCompliance(os.Args[2:], os.Stdout)
	case "daemon":
		// metaroced itself, so the demo can start daemons from this binary.
		os.Exit(daemon.Main("metaroce daemon", os.Args[2:], os.Stderr))
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "metaroce: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "metaroce:", err)
		os.Exit(1)
	}
}
