package main

import (
	"bytes"
	"encoding/json"
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
