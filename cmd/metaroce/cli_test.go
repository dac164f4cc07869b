package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildTool builds this command once per test that needs its exit codes.
func buildTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "metaroce")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestHelpExitsZero: every subcommand's -h prints its flags on standard
// output and exits 0; an unknown flag exits 2 naming it, on standard
// error, once.
func TestHelpExitsZero(t *testing.T) {
	bin := buildTool(t)
	for _, sub := range [][]string{{"sim"}, {"demo"}, {"demo", "-topology", "leafspine"}, {"perf", "write-bw"},
		{"perf", "write-lat"}, {"status"}, {"qps"}, {"paths"}, {"top"}, {"compliance"}, {"fabtests"}, {"version"}, {"daemon"}} {
		name := strings.Join(sub, " ")
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, append(sub, "-h")...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if c := exitCode(cmd.Run()); c != 0 {
			t.Errorf("%s -h: exit %d\n%s", name, c, stderr.String())
		}
		if name != "version" && !strings.Contains(stdout.String()+stderr.String(), "  -") {
			t.Errorf("%s -h printed no flags", name)
		}
		stdout.Reset()
		stderr.Reset()
		cmd = exec.Command(bin, append(sub, "-no-such-flag")...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if c := exitCode(cmd.Run()); c != 2 {
			t.Errorf("%s -no-such-flag: exit %d, want 2", name, c)
		}
		if msg := stderr.String(); !strings.Contains(msg, "-no-such-flag") || strings.Count(msg, "no-such-flag") != 1 {
			t.Errorf("%s -no-such-flag printed %q", name, msg)
		}
	}
}

// TestSimRefusals: invalid values are refused naming the flag and the
// valid range or choices, with exit 2, and never reach the simulator.
func TestSimRefusals(t *testing.T) {
	bin := buildTool(t)
	for args, want := range map[string]string{
		"sim -paths -3":                        "-paths -3: want a value in [1, 256]",
		"sim -paths 0":                         "-paths 0: want a value in [1, 256]",
		"sim -scenario incast -senders 0":      "-senders 0: want a value in [1, 4096]",
		"sim -scenario failover -conns -5":     "-conns -5: want a value in [1, 4096]",
		"sim -scenario bogus":                  "lossy, failover, degraded, incast, fairness, mixed",
		"sim -topology clos2 -scenario bogus":  "alltoall, permutation, allreduce-ring, allreduce-hd, incast",
		"sim -fail-at 2000 -scenario failover": `"2000" has no unit`,
		"sim -loss 1.5":                        "-loss 1.5: want a value in [0, 1)",
		"sim -size 64kb":                       `"64kb" is not a size`,
		"top -interval 1":                      `"1" has no unit`,
		"demo -loss 2":                         "-loss 2: want a value in [0, 1)",
		// -cc and -fault are refused before anything runs, for every
		// scenario, listing the valid values.
		"sim -scenario incast -cc bogus":               `-cc "bogus": want one of metaroce, `,
		"sim -scenario fairness -cc metaroce,bogus":    `-cc "bogus": want one of metaroce, `,
		"sim -scenario mixed -cc bogus":                `, a comma-separated list of them, or all`,
		"sim -topology clos2 -cc bogus":                `-cc "bogus": want one of metaroce, `,
		"sim -topology clos2 -fault bogus":             `-fault "bogus": want one of link-down, spine-down, plane-down, degrade`,
		"sim -topology clos2 -fault plane-down":        "-fault plane-down: needs -planes 2 or more",
		"sim -topology clos3 -fault link-down,degrade": `-fault "link-down,degrade": want one of`,
	} {
		refused(t, bin, args, want)
	}
	// What the two-host lossy scenario does by default: it loses packets,
	// and -transport rocev2 runs it.
	out, err := exec.Command(bin, "sim", "-messages", "50", "-transport", "rocev2").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "transport rocev2") {
		t.Fatalf("lossy rocev2: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "wire       0 dropped") {
		t.Errorf("the lossy scenario's default dropped nothing:\n%s", out)
	}
}

// refused runs bin with args and wants exit 2 and want on standard error,
// with the command's name said at most twice (no stutter).
func refused(t *testing.T, bin, args, want string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, strings.Fields(args)...)
	cmd.Stderr = &stderr
	c := exitCode(cmd.Run())
	if c != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("%s: exit %d, printed %q; want exit 2 and %q", args, c, stderr.String(), want)
	}
	if strings.Count(stderr.String(), "metaroce") > 2 {
		t.Errorf("%s: stutters: %q", args, stderr.String())
	}
}

// TestOperatorRefusals: the operator's commands and the compliance suite
// refuse a value out of range the same way, before they dial anything.
func TestOperatorRefusals(t *testing.T) {
	bin := buildTool(t)
	for args, want := range map[string]string{
		"top -interval 0s":                        "-interval 0s: want at least 10ms",
		"top -interval 5ms":                       "-interval 5ms: want at least 10ms",
		"top -interval -1s":                       "-interval -1s: want at least 10ms",
		"top -conns 0":                            "-conns 0: want a value in [1, 1024]",
		"top -conns 2000":                         "-conns 2000: want a value in [1, 1024]",
		"top -count -1":                           "-count -1: want a value in [0, 1073741824]",
		"status -conns -1":                        "-conns -1: want a value in [1, 1024]",
		"qps -conns 0":                            "-conns 0: want a value in [1, 1024]",
		"paths -conns 5000":                       "-conns 5000: want a value in [1, 1024]",
		"compliance -target 10.0.0.1 -port 70000": "-port 70000: want a value in [1, 65535]",
		"compliance -target 10.0.0.1 -port 0":     "-port 0: want a value in [1, 65535]",
		"compliance -spawn -dscp-data 64":         "-dscp-data 64: want a value in [-1, 63]",
		"compliance -spawn -reply-rate -1":        "-reply-rate -1: want a value in [0, 1048576]",
		"compliance -spawn -backend dpdk":         `-backend "dpdk": want udp, afxdp or auto`,
		"compliance -spawn -timeout 0s":           "-timeout 0s, -quiet 60ms: want positive durations",
		"compliance -spawn -quiet 60":             `"60" has no unit`,
		"compliance":                              "give exactly one of -target ADDR and -spawn",
		"compliance -spawn -target 10.0.0.1":      "give exactly one of -target ADDR and -spawn",
	} {
		refused(t, bin, args, want)
	}
}
