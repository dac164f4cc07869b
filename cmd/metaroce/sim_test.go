package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimJSON runs the documented command line and checks the JSON has the
// fields the issue and README promise, with a verified, complete run.
func TestSimJSON(t *testing.T) {
	var out bytes.Buffer
	args := strings.Fields("-scenario lossy -loss 0.05 -reorder 0.1 -dup 0.01 -corrupt 0.01 -messages 100 -size 65536 -seed 1 -json")
	if err := runSim(args, &out); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"scenario", "transport", "seed", "messages", "messages_completed", "messages_lost",
		"duplicates_delivered", "corrupt_delivered", "bytes_verified", "packets_sent", "packets_retransmitted",
		"retransmit_ratio", "goodput_gbps", "fct_p50_us", "fct_p99_us", "sim_time_us", "events", "wall_s"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if m["messages_completed"] != float64(100) || m["bytes_verified"] != float64(100*65536) {
		t.Errorf("completed %v verified %v", m["messages_completed"], m["bytes_verified"])
	}
}

func TestSimReportAndErrors(t *testing.T) {
	var out bytes.Buffer
	if err := runSim(strings.Fields("-messages 20 -size 4096 -op read"), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "20 of 20 complete") {
		t.Errorf("report:\n%s", out.String())
	}
	for _, bad := range []string{"-scenario nope", "-loss 1.5", "-op nope", "-rate-gbps 0"} {
		if err := runSim(strings.Fields(bad), &out); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSimFabric runs the fabric command with the baseline beside it and
// checks the JSON carries both runs and their ratios, and that -out
// wrote the CSV files and plots.
func TestSimFabric(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	args := strings.Fields("-topology clos2 -scenario alltoall -hosts 16 -size 8192 -loss 0.01 -compare rocev2 -seed 1 -json -out " + dir)
	if err := runSim(args, &out); err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	for _, run := range []string{"metaroce", "rocev2"} {
		for _, k := range []string{"collective_us", "ideal_us", "over_ideal", "fct_p50_us", "fct_p99_us", "link_util_p50",
			"link_util_p99", "events", "events_per_s", "heap_bytes_per_host", "messages_lost"} {
			if _, ok := m[run][k]; !ok {
				t.Errorf("%s lacks %q", run, k)
			}
		}
		if m[run]["messages_completed"] != float64(16*15) {
			t.Errorf("%s: %v of %d complete", run, m[run]["messages_completed"], 16*15)
		}
	}
	if _, ok := m["rocev2_over_metaroce"]["fct_p99_us"]; !ok {
		t.Errorf("no ratios: %v", m["rocev2_over_metaroce"])
	}
	for _, f := range []string{"fct_cdf.png", "goodput.png", "link_util.png", "fct_metaroce.csv", "fct_rocev2.csv",
		"goodput_metaroce.csv", "links_rocev2.csv"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := runSim(strings.Fields("-topology clos4"), &out); err == nil {
		t.Error("-topology clos4 accepted")
	}
}
