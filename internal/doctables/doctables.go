// Package doctables keeps the figures in docs/ equal to what the commands
// print today. A table in a document is fenced by two comments,
//
//	<!-- table incast-cc: metaroce sim -scenario incast -senders 32 -cc all -json -->
//	| ... the rows ... |
//	<!-- end table -->
//
// and Tables says, for each id, the metaroce command lines that produce
// it and how their JSON becomes rows. Rewrite runs the commands through
// a metaroce binary (the real command line, so the table is literally
// what a reader who runs the command gets) and replaces each fenced
// table; `go generate ./internal/doctables` rewrites docs/, and the test
// fails when a document has drifted. The simulator is deterministic per
// seed, so the figures match exactly; nothing timed (wall time, events
// per second) goes into a table.
//
// Only tables whose commands take seconds are fenced: the 256- and
// 1024-host fabric runs take minutes of CPU each and are quoted with the
// date and the command that measured them instead.
package doctables

//go:generate go run ./gen -bin "" ../../docs/sim.md

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"

	"github.com/metaroce/metaroce/sim"
)

// Table is one fenced table: its commands (metaroce's arguments, each
// printing JSON) and how their outputs become markdown rows.
type Table struct {
	ID       string
	Commands [][]string
	Render   func(outs [][]byte) (string, error)
}

// Tables are the fenced tables, by id.
var Tables = map[string]Table{
	"incast-cc": {ID: "incast-cc",
		Commands: [][]string{strings.Fields("sim -scenario incast -senders 32 -cc all -json")},
		Render:   renderCC("incast")},
	"fairness-cc": {ID: "fairness-cc",
		Commands: [][]string{strings.Fields("sim -scenario fairness -flows 4 -cc all -json")},
		Render:   renderCC("fairness")},
	"mixed-cc": {ID: "mixed-cc",
		Commands: [][]string{strings.Fields("sim -scenario mixed -cc all -json")},
		Render:   renderCC("mixed")},
	"fabric-workloads": fabricWorkloads(),
	"failover": {ID: "failover",
		Commands: [][]string{
			strings.Fields("sim -scenario failover -paths 8 -fail 2 -fail-at 2ms -messages 4000 -seed 1 -json"),
			strings.Fields("sim -scenario failover -paths 8 -fail 2 -fail-at 2ms -messages 4000 -seed 1 -transport rocev2 -json"),
			strings.Fields("sim -scenario degraded -paths 8 -slow-factor 4 -seed 1 -json"),
		},
		Render: renderFailover},
}

var fence = regexp.MustCompile(`(?m)^<!-- table ([a-z0-9-]+): [^\n]*-->\n(?s:(.*?))^<!-- end table -->$`)

// Run runs one metaroce command line through the binary at bin.
type Run func(args []string) ([]byte, error)

// Binary is a Run through the metaroce executable at path.
func Binary(path string) Run {
	return func(args []string) ([]byte, error) {
		cmd := exec.Command(path, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("metaroce %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
}

// Rewrite regenerates every fenced table of doc; it returns the new text
// and the ids of the tables that changed.
func Rewrite(doc []byte, run Run) ([]byte, []string, error) {
	var changed []string
	var firstErr error
	out := fence.ReplaceAllFunc(doc, func(m []byte) []byte {
		sub := fence.FindSubmatch(m)
		id, old := string(sub[1]), string(sub[2])
		t, ok := Tables[id]
		if !ok {
			if firstErr == nil {
				firstErr = fmt.Errorf("table %q: not in doctables.Tables", id)
			}
			return m
		}
		var outs [][]byte
		for _, c := range t.Commands {
			o, err := run(c)
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("table %s: %w", id, err)
				}
				return m
			}
			outs = append(outs, o)
		}
		rows, err := t.Render(outs)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("table %s: %w", id, err)
			}
			return m
		}
		if rows != old {
			changed = append(changed, id)
		}
		var cmds []string
		for _, c := range t.Commands {
			cmds = append(cmds, "metaroce "+strings.Join(c, " "))
		}
		return []byte(fmt.Sprintf("<!-- table %s: %s -->\n%s<!-- end table -->", id, strings.Join(cmds, "; "), rows))
	})
	return out, changed, firstErr
}

// lines decodes one JSON object per line.
func lines[T any](b []byte) ([]T, error) {
	var out []T
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no JSON in %q", b)
	}
	return out, nil
}

func kib(b int) string { return fmt.Sprintf("%.0f KiB", float64(b)/1024) }

func renderCC(scenario string) func([][]byte) (string, error) {
	return func(outs [][]byte) (string, error) {
		rs, err := lines[sim.CCResult](outs[0])
		if err != nil {
			return "", err
		}
		var b strings.Builder
		switch scenario {
		case "incast":
			b.WriteString("| cc | timeouts | tail drops | queue max / p99 | port busy | p99 / ideal |\n|---|---|---|---|---|---|\n")
			for _, r := range rs {
				fmt.Fprintf(&b, "| %s | %d | %d | %.0f / %s | %.1f%% | %.2f |\n", r.CC, r.Timeouts, r.QueueDrops,
					float64(r.QueueMaxBytes)/1024, kib(r.QueueP99Bytes), 100*r.Utilisation, r.P99OverIdeal)
			}
		case "fairness":
			b.WriteString("| cc | Jain mean / worst | RTTs to 0.95 after each join | queue p99 | port busy |\n|---|---|---|---|---|\n")
			for _, r := range rs {
				var conv []string
				for _, c := range r.ConvergeRTTs {
					if c < 0 {
						conv = append(conv, "never")
					} else {
						conv = append(conv, fmt.Sprintf("%.1f", c))
					}
				}
				fmt.Fprintf(&b, "| %s | %.4f / %.4f | %s | %s | %.1f%% |\n", r.CC, r.JainFairness, r.JainMin,
					strings.Join(conv, ", "), kib(r.QueueP99Bytes), 100*r.Utilisation)
			}
		case "mixed":
			b.WriteString("| cc | short p50 / p99 | short p99 / ideal | long p99 / ideal | queue p99 | port busy |\n|---|---|---|---|---|---|\n")
			for _, r := range rs {
				var short, long sim.ClassFCT
				for _, c := range r.Classes {
					if c.Class == "short" {
						short = c
					} else {
						long = c
					}
				}
				fmt.Fprintf(&b, "| %s | %.1f / %.1f us | %.2f | %.2f | %s | %.1f%% |\n", r.CC, short.FCTP50us, short.FCTP99us,
					short.P99OverIdeal, long.P99OverIdeal, kib(r.QueueP99Bytes), 100*r.Utilisation)
			}
		}
		return b.String(), nil
	}
}

func renderFailover(outs [][]byte) (string, error) {
	var rs [3]*sim.MultipathResult
	for i := range rs {
		v, err := lines[sim.MultipathResult](outs[i])
		if err != nil {
			return "", err
		}
		rs[i] = &v[0]
	}
	m, r, d := rs[0], rs[1], rs[2]
	recovery := func(x *sim.MultipathResult) string {
		if !x.Recovered {
			return fmt.Sprintf("does not recover: %d connection(s) never complete again", x.ConnsNeverResumed)
		}
		return fmt.Sprintf("%.0f us (90%% of after)", x.RecoveryUs)
	}
	stall := func(x *sim.MultipathResult) string {
		if x.ConnStallUsJSON == nil {
			return "never completes again"
		}
		return fmt.Sprintf("%.0f us", *x.ConnStallUsJSON)
	}
	var share float64
	var healthy, n float64
	for _, p := range d.PerPath {
		if p.Slow {
			share = float64(p.PacketsAfter)
		} else if !p.Failed {
			healthy += float64(p.PacketsAfter)
			n++
		}
	}
	if n > 0 && healthy > 0 {
		share /= healthy / n
	}
	var b strings.Builder
	b.WriteString("| scenario | metaroce | rocev2 baseline |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| failover 2/8 paths: goodput before / after | %.1f / %.1f Gb/s | %.1f / %.1f Gb/s |\n",
		m.GoodputBeforeGbps, m.GoodputAfterGbps, r.GoodputBeforeGbps, r.GoodputAfterGbps)
	fmt.Fprintf(&b, "| recovery | %s | %s |\n", recovery(m), recovery(r))
	fmt.Fprintf(&b, "| longest connection stall | %s | %s |\n", stall(m), stall(r))
	fmt.Fprintf(&b, "| messages lost / failed | %d / %d | %d / %d |\n", m.MessagesLost, m.MessagesFailed, r.MessagesLost, r.MessagesFailed)
	fmt.Fprintf(&b, "| degraded (rate /4, delay x4) path share after the fault | %.2f of the healthy mean | - |\n", share)
	return b.String(), nil
}

var workloads = []string{"alltoall", "permutation", "allreduce-ring", "allreduce-hd", "incast"}

// fabricWorkloads: each collective on 32 hosts of 32 KiB, lossless, on a
// two- and a three-tier Clos.
func fabricWorkloads() Table {
	t := Table{ID: "fabric-workloads"}
	for _, w := range workloads {
		for _, topo := range []string{"clos2", "clos3"} {
			t.Commands = append(t.Commands, strings.Fields("sim -topology "+topo+" -scenario "+w+" -hosts 32 -size 32KiB -seed 1 -json"))
		}
	}
	t.Render = func(outs [][]byte) (string, error) {
		var b strings.Builder
		b.WriteString("| workload, 32 KiB | clos2 x ideal | clos3 x ideal |\n|---|---|---|\n")
		for i, w := range workloads {
			var x [2]float64
			for j := range x {
				rs, err := lines[sim.FabricResult](outs[2*i+j])
				if err != nil {
					return "", err
				}
				x[j] = rs[0].OverIdeal
			}
			name := w
			switch w {
			case "alltoall":
				name = "alltoall (all posted at once)"
			case "incast":
				name = "incast (31:1)"
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f |\n", name, x[0], x[1])
		}
		return b.String(), nil
	}
	return t
}
