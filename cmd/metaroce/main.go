// Command metaroce is the MetaRoCE command-line tool: the fabric
// simulator, the namespace demos, perftest-style benchmarks through
// metaroced, the operator's live views and the compliance suite. Every
// subcommand follows internal/cli's conventions: -h exits 0, durations
// and sizes carry units, a bad value is refused naming the flag and its
// range, and a read-only command has -json.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/decode"
	"github.com/metaroce/metaroce/internal/demo"
	"github.com/metaroce/metaroce/internal/perf"
	"github.com/metaroce/metaroce/internal/version"
)

const usage = `usage: metaroce <command> [flags]

commands:
  sim         run a scenario on the virtual-time fabric simulator
  demo        metaroced daemons in network namespaces: bandwidth, latency, baselines (root)
  perf        perftest-style benchmarks through metaroced: write-bw, write-lat, read-bw, send-lat
  status      the daemon's engines: backend, connections, packets, drops, busy time
  qps         the daemon's connections (queue pairs), busiest first
  paths       each connection's logical paths: state, RTT, marks, losses, repaths
  top         a live view of engines and connections, refreshed in place
  compliance  the packet-level conformance suite against -target ADDR or a -spawned metaroced
  fabtests    libfabric's fabtests through the metaroce provider and tcp;ofi_rxm, in namespaces (root)
  decode      a pcap or pcapng capture of MetaRoCE traffic: fields, connections, loss, RTT
  daemon      run metaroced itself (the demos start their daemons this way)
  version     print the version and exit

Run 'metaroce <command> -h' for a command's flags.
`

// commands maps a subcommand to its runner; each parses its own flags.
var commands = map[string]func(args []string, out io.Writer) error{
	"sim":        runSim,
	"demo":       demo.Run,
	"perf":       perf.Run,
	"status":     runStatus,
	"qps":        runQPs,
	"paths":      runPaths,
	"top":        runTop,
	"compliance": runCompliance,
	"fabtests":   demo.Fabtests,
	"decode":     decode.Run,
	"version": func(args []string, out io.Writer) error {
		if err := cli.Parse(cli.NewFlagSet("metaroce version", out), args); err != nil {
			return err
		}
		_, err := fmt.Fprintln(out, "metaroce", version.String())
		return err
	},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name := os.Args[1]
	switch name {
	case "daemon":
		// metaroced itself, so the demo can start daemons from this binary.
		os.Exit(daemon.Main("metaroce daemon", os.Args[2:], os.Stderr))
	case "-h", "--help", "-help", "help":
		fmt.Print(usage)
		return
	case "-version", "--version":
		name = "version"
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "metaroce: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	os.Exit(cli.Exit("metaroce "+name, run(os.Args[2:], os.Stdout), os.Stderr))
}
