package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fabtestsUnderRace is set by fabtests_race_test.go: the runs here are
// subprocesses in namespaces, which the race detector adds nothing to,
// so the runs with real fabtests are left to the plain test pass.
var fabtestsUnderRace bool

// A runfabtests.sh as fabtests 1.17's lays out its lists (the stand-in
// programs below answer to these).
const fakeRunfabtests = `#!/usr/bin/env bash
declare -ri FI_ENODATA=61
neg_unit_tests=(
	"fi_rdm g00n13s"
	"fi_msg g00n13s"
)

functional_tests=(
	"fi_rdm"
	"fi_msg"
	"fi_rdm_tagged_bw -e rdm"
	"fi_cq_data -e msg"
)

short_tests=(
	"fi_rdm_pingpong -I 5"
	"fi_rdm_cntr_pingpong -I 5"
	"fi_dgram_pingpong -I 5"
)

standard_tests=(
	"fi_rdm_pingpong"
)

unit_tests=(
	"fi_getinfo_test -s SERVER_ADDR GOOD_ADDR"
	"fi_av_test -g GOOD_ADDR -n 1 -s SERVER_ADDR -e dgram"
)

prov_efa_tests=( \
	"fi_efa_rnr_read_cq_error"
)
`

// TestFabtestsLists: the lists come out of runfabtests.sh in its order,
// with the endpoint type each case asks for; the default selection is the
// RDM cases and the unit tests that open no endpoint. With a fabtests
// build at hand, its runfabtests.sh parses too and has the cases the
// runner is about.
func TestFabtestsLists(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "runfabtests.sh")
	os.WriteFile(script, []byte(fakeRunfabtests), 0o755)
	cases, err := fabtestsCases(script, []string{"unit", "functional", "short", "standard"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		got = append(got, c.List+"/"+c.Endpoint+"/"+c.Cmd)
	}
	want := []string{"unit//fi_getinfo_test -s SERVER_ADDR GOOD_ADDR", "unit/dgram/fi_av_test -g GOOD_ADDR -n 1 -s SERVER_ADDR -e dgram",
		"unit/rdm/fi_rdm g00n13s", "unit/msg/fi_msg g00n13s",
		"functional/rdm/fi_rdm", "functional/msg/fi_msg", "functional/rdm/fi_rdm_tagged_bw -e rdm", "functional/msg/fi_cq_data -e msg",
		"short/rdm/fi_rdm_pingpong -I 5", "short/rdm/fi_rdm_cntr_pingpong -I 5", "short/dgram/fi_dgram_pingpong -I 5",
		"standard/rdm/fi_rdm_pingpong"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("cases:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !cases[2].Neg || !cases[2].Unit || cases[0].Neg || cases[4].Unit {
		t.Errorf("unit/neg flags wrong: %+v", cases[:5])
	}
	if _, err := fabtestsCases(script, []string{"complex"}); err == nil {
		t.Error("an unknown list was accepted")
	}

	b, ok := fabtestsCached(fabtestsTestCache())
	if !ok {
		t.Logf("no fabtests build in %s: the real runfabtests.sh is not checked", fabtestsTestCache())
		return
	}
	real, err := fabtestsCases(filepath.Join(b.Bin, "runfabtests.sh"), []string{"unit", "functional", "short", "standard"})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	have := map[string]bool{}
	for _, c := range real {
		if c.Endpoint == "rdm" || c.Endpoint == "" {
			n[c.List]++
			have[c.List+": "+c.Cmd] = true
		}
	}
	for _, c := range []string{"short: fi_rdm_pingpong -I 5", "standard: fi_rdm_tagged_bw -v -U", "functional: fi_rdm_multi_client -C 10 -I 5",
		"unit: fi_rdm g00n13s", "unit: fi_av_test -g GOOD_ADDR -n 1 -s SERVER_ADDR -e rdm", "functional: fi_shared_ctx"} {
		if !have[c] {
			t.Errorf("fabtests %s: no RDM case %q", fabtestsVersion, c)
		}
	}
	for c := range have {
		if strings.Contains(c, "-e msg") || strings.Contains(c, "-e dgram") || strings.Contains(c, "fi_msg_pingpong") {
			t.Errorf("a case of another endpoint type selected: %s", c)
		}
	}
	t.Logf("fabtests %s RDM cases: %v", fabtestsVersion, n)
}

// TestFabtestsClassify: runfabtests.sh's rules, and a timeout is a hang.
func TestFabtestsClassify(t *testing.T) {
	cs := fabtestsCase{Cmd: "fi_rdm"}
	unit := fabtestsCase{Cmd: "fi_eq_test", Unit: true}
	neg := fabtestsCase{Cmd: "fi_rdm g00n13s", Unit: true, Neg: true}
	for _, tc := range []struct {
		c        fabtestsCase
		s, cl    int
		timedOut bool
		want     string
	}{
		{cs, 0, 0, false, ftPass},
		{cs, 61, 61, false, ftNotRun},
		{cs, 38, 38, false, ftNotRun},
		{cs, 61, 38, false, ftFail},
		{cs, ftKilled, 61, false, ftFail}, // the client alone: not a not-run
		{cs, 0, 1, false, ftFail},
		{cs, 0, 0, true, ftHang},
		{cs, 61, 61, true, ftHang},
		{unit, 0, 0, false, ftPass},
		{unit, 61, 0, false, ftNotRun},
		{unit, 38, 0, false, ftNotRun},
		{unit, 1, 0, false, ftFail},
		{unit, ftKilled, 0, true, ftHang},
		{neg, 61, 0, false, ftPass},
		{neg, 0, 0, false, ftFail},
		{neg, 38, 0, false, ftFail},
	} {
		if got := classifyFabtests(tc.c, tc.s, tc.cl, tc.timedOut); got != tc.want {
			t.Errorf("%s server %d client %d timeout %v: %s, want %s", tc.c.Cmd, tc.s, tc.cl, tc.timedOut, got, tc.want)
		}
	}
}

func fabtestsTestCache() string {
	if c := os.Getenv("FABTESTS_CACHE"); c != "" {
		return c
	}
	return fabtestsDefaultCache
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// isServer, in a stand-in program: a server's arguments end "-s ADDR", a
// client's "-s ADDR ADDR" (or "-E" and "-E ADDR" out of band).
const isServer = `n=$#; eval "p=\${$((n-1))}"; eval "l=\${$n}"
server() { [ "$p" = "-s" ] || [ "$l" = "-E" ]; }
`

// TestFabtestsRunnerPromises runs the runner, as root in namespaces, on
// stand-in programs whose outcomes are known, and checks what it promises:
// each result as runfabtests.sh would give it, a case still running at
// the timeout killed and reported as a hang (not waited for), a server
// killed 2 s after its client failed, the arguments runfabtests.sh
// passes, the Markdown table and summary line parsing to the JSON's
// results.
func TestFabtestsRunnerPromises(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the runner needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip (iproute2)")
	}
	bin := t.TempDir()
	args := filepath.Join(t.TempDir(), "args")
	os.WriteFile(filepath.Join(bin, "runfabtests.sh"), []byte(fakeRunfabtests), 0o755)
	log := `echo "$(basename $0) $*" >> "$ARGLOG"` + "\n"
	writeScript(t, filepath.Join(bin, "fi_rdm"), log+"echo 'fi_getinfo(): ret=-61 (No data available)'\nexit 61\n")
	writeScript(t, filepath.Join(bin, "fi_rdm_tagged_bw"), "echo 'fi_cntr_open(): ret=-38'\nexit 38\n")
	// -I 5 passes; without it (the standard list's case) both sides wait
	// forever, as a server does for a client that never comes.
	writeScript(t, filepath.Join(bin, "fi_rdm_pingpong"), log+"case \" $* \" in *\" -I 5 \"*) exit 0;; esac\necho waiting\nexec sleep 600\n")
	writeScript(t, filepath.Join(bin, "fi_rdm_cntr_pingpong"), isServer+"if server; then exec sleep 600; fi\necho 'client: no answer' >&2\nexit 1\n")
	writeScript(t, filepath.Join(bin, "fi_getinfo_test"), log+"exit 0\n")

	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var out bytes.Buffer
	start := time.Now()
	err := Fabtests([]string{"-bin", bin, "-providers", "tcp;ofi_rxm", "-loss", "0", "-timeout", "3s", "-server-wait", "100ms",
		"-progress=false", "-env", "ARGLOG=" + args, "-out", jsonPath}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("%s", out.String())
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the run took %v: the hang was waited for, not killed at 3 s", d)
	}
	b, _ := os.ReadFile(jsonPath)
	var r FabtestsResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(r.Runs) != 1 || r.Runs[0].Provider != "tcp;ofi_rxm" {
		t.Fatalf("runs %+v", r.Runs)
	}
	run := r.Runs[0]
	want := map[string]string{
		"unit: fi_getinfo_test -s SERVER_ADDR GOOD_ADDR": ftPass,
		"unit: fi_rdm g00n13s":                           ftPass, // negative: -FI_ENODATA is its pass
		"functional: fi_rdm":                             ftNotRun,
		"functional: fi_rdm_tagged_bw -e rdm":            ftNotRun,
		"short: fi_rdm_pingpong -I 5":                    ftPass,
		"short: fi_rdm_cntr_pingpong -I 5":               ftFail,
		"standard: fi_rdm_pingpong":                      ftHang,
	}
	got := map[string]FabtestsCase{}
	for _, c := range run.Cases {
		got[c.List+": "+c.Case] = c
	}
	if len(got) != len(want) {
		t.Errorf("%d cases, want %d (msg and dgram ones left out): %v", len(got), len(want), got)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g.Result != w {
			t.Errorf("%s: %+v, want %s", k, g, w)
		}
	}
	if c := run.Counts; c != (FabtestsCounts{Pass: 3, NotRun: 2, Fail: 1, Hang: 1, Total: 7}) {
		t.Errorf("counts %+v", c)
	}
	hang := got["standard: fi_rdm_pingpong"]
	if hang.Seconds < 2.9 || hang.Seconds > 12 || hang.Server.Killed != "timeout" || hang.Client.Killed != "timeout" ||
		hang.Server.Exit != ftKilled || len(hang.Client.Tail) == 0 || hang.Client.Tail[0] != "waiting" {
		t.Errorf("hang %+v server %+v client %+v", hang, hang.Server, hang.Client)
	}
	fail := got["short: fi_rdm_cntr_pingpong -I 5"]
	if fail.Server.Killed != "client failed" || fail.Client.Exit != 1 || fail.Seconds > 2.9 ||
		!strings.Contains(strings.Join(fail.Client.Tail, "\n"), "client: no answer") {
		t.Errorf("fail %+v server %+v client %+v", fail, fail.Server, fail.Client)
	}
	if nr := got["functional: fi_rdm"]; nr.Server.Exit != 61 || nr.Client.Exit != 61 || len(nr.Server.Errors) != 1 ||
		nr.Server.Errors[0] != "fi_getinfo(): ret=-61 (No data available)" {
		t.Errorf("not run %+v", nr)
	}

	// The arguments, as runfabtests.sh's cs_test and unit_test give them.
	h := got["short: fi_rdm_pingpong -I 5"]
	sf, cf := strings.Fields(h.Server.Cmd), strings.Fields(h.Client.Cmd)
	srv, cli := sf[len(sf)-1], cf[len(cf)-2]
	logged, _ := os.ReadFile(args)
	for _, w := range []string{
		"fi_rdm_pingpong -I 5 -p tcp;ofi_rxm -s " + srv,
		"fi_rdm_pingpong -I 5 -p tcp;ofi_rxm -s " + cli + " " + srv,
		"fi_getinfo_test -s " + srv + " " + srv + " -p tcp;ofi_rxm",
		"fi_rdm g00n13s -p tcp;ofi_rxm",
	} {
		if !strings.Contains(string(logged), w+"\n") {
			t.Errorf("no run with arguments %q in:\n%s", w, logged)
		}
	}
	if srv == cli || !strings.HasPrefix(srv, "10.") {
		t.Errorf("server %s, client %s", srv, cli)
	}

	// The table: one row per case, its result the JSON's; the summary.
	rows := parseFabtestsTable(t, out.String())
	if len(rows) != 7 {
		t.Errorf("%d table rows, want 7", len(rows))
	}
	for k, res := range rows {
		if got[k].Result != res {
			t.Errorf("table %s: %s, JSON %s", k, res, got[k].Result)
		}
	}
	if !strings.Contains(out.String(), "summary: tcp;ofi_rxm at 0% loss: 3 pass, 2 not run, 1 fail, 1 hang of 7 cases") {
		t.Error("no summary line")
	}

	// Out of band: -E on the server, -E ADDR on the client.
	os.Remove(args)
	out.Reset()
	if err := Fabtests([]string{"-bin", bin, "-providers", "tcp;ofi_rxm", "-loss", "0", "-oob", "-lists", "short", "-match", "^fi_rdm_pingpong -I 5$",
		"-server-wait", "0s", "-progress=false", "-env", "ARGLOG=" + args, "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	logged, _ = os.ReadFile(args)
	if l := strings.Split(strings.TrimSpace(string(logged)), "\n"); len(l) != 2 ||
		!strings.Contains(string(logged), "fi_rdm_pingpong -I 5 -p tcp;ofi_rxm -E\n") ||
		!strings.Contains(string(logged), "fi_rdm_pingpong -I 5 -p tcp;ofi_rxm -E "+srv+"\n") {
		t.Errorf("-oob arguments:\n%s", logged)
	}
}

// parseFabtestsTable reads the Markdown rows "| list | case | result | s
// | exits | note |" into "list: case" -> result (the JSON's word).
func parseFabtestsTable(t *testing.T, s string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| list ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 6 {
			t.Errorf("row with %d cells: %q", len(cells), line)
			continue
		}
		res := strings.TrimSpace(cells[2])
		if res == "not run" {
			res = ftNotRun
		}
		switch res {
		case ftPass, ftNotRun, ftFail, ftHang:
		default:
			t.Errorf("row with result %q: %q", res, line)
		}
		rows[strings.TrimSpace(cells[0])+": "+strings.TrimSpace(cells[1])] = res
	}
	return rows
}

// TestFabtests runs real fabtests (a build in the cache, or one made from
// FABTESTS_SRC) on a short list through metaroce and tcp;ofi_rxm at 0%
// loss. It asserts the runner, not the provider: tcp;ofi_rxm passes
// fi_rdm_pingpong -I 5, the results are whole; metaroce's are printed.
// Then the real fi_rdm_pingpong as a server whose client never comes,
// under a 3 s timeout, is a hang. Skipped without a build or a source,
// root, or libfabric.
func TestFabtests(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the runner needs root (network namespaces)")
	}
	if fabtestsUnderRace {
		t.Skip("under the race detector: the runs are subprocesses; the plain test pass runs this")
	}
	if _, err := os.Stat("/usr/include/rdma/fabric.h"); err != nil {
		t.Skip("no libfabric headers (libfabric-dev)")
	}
	if _, err := exec.LookPath("fi_info"); err != nil {
		t.Skip("no libfabric (libfabric-bin)")
	}
	build, err := fabtestsFindOrBuild(os.Getenv("FABTESTS_SRC"), fabtestsTestCache(), false, os.Stderr)
	if err != nil {
		if errors.Is(err, errFabtestsNoSource) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join("..", "..", "libmetaroce")
	srcs, _ := filepath.Glob(filepath.Join(root, "src", "*.c"))
	prov, _ := filepath.Glob(filepath.Join(root, "fabric", "*.c"))
	ccArgs := append(append([]string{"-std=gnu11", "-O2", "-fPIC", "-shared", "-I" + filepath.Join(root, "include"),
		"-o", filepath.Join(dir, "libmetaroce-fi.so")}, prov...), srcs...)
	if b, err := exec.Command("cc", append(ccArgs, "-lfabric", "-lpthread")...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, b)
	}
	var out bytes.Buffer
	err = Fabtests([]string{"-bin", build.Bin, "-providers", "metaroce,tcp;ofi_rxm", "-loss", "0", "-lists", "short,functional",
		"-match", "^fi_rdm_pingpong -I 5$|^fi_rdm$", "-timeout", "40s", "-provider-dir", dir, "-progress=false", "-json"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r FabtestsResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(r.Runs) != 2 || len(r.Verdicts) != 1 {
		t.Fatalf("runs %d, verdicts %d: %s", len(r.Runs), len(r.Verdicts), out.String())
	}
	for _, run := range r.Runs {
		if run.Counts.Total != 2 || run.Counts.Pass+run.Counts.NotRun+run.Counts.Fail+run.Counts.Hang != 2 {
			t.Errorf("%s: counts %+v", run.Provider, run.Counts)
		}
		for _, c := range run.Cases {
			t.Logf("%s: %s %s: %s in %.1f s (server %d %v, client %d %v)", run.Provider, c.List, c.Case, c.Result, c.Seconds,
				c.Server.Exit, c.Server.Tail, c.Client.Exit, c.Client.Tail)
			if run.Provider == "tcp;ofi_rxm" && c.Case == "fi_rdm_pingpong -I 5" && c.Result != ftPass {
				t.Errorf("tcp;ofi_rxm did not pass fi_rdm_pingpong -I 5: %+v %+v %+v", c, c.Server, c.Client)
			}
		}
	}
	t.Logf("verdict: %+v", r.Verdicts[0])

	// A server with no client: the real program, its client a stand-in
	// that exits at once; the server waits until the timeout kills it.
	fake := t.TempDir()
	os.Symlink(filepath.Join(build.Bin, "runfabtests.sh"), filepath.Join(fake, "runfabtests.sh"))
	writeScript(t, filepath.Join(fake, "fi_rdm_pingpong"), isServer+"if server; then exec "+filepath.Join(build.Bin, "fi_rdm_pingpong")+" \"$@\"; fi\nexit 0\n")
	out.Reset()
	err = Fabtests([]string{"-bin", fake, "-providers", "tcp;ofi_rxm", "-loss", "0", "-lists", "short", "-match", "^fi_rdm_pingpong -I 5$",
		"-timeout", "3s", "-progress=false", "-json"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	r = FabtestsResult{}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if c := r.Runs[0].Cases[0]; c.Result != ftHang || c.Server.Killed != "timeout" || c.Client.Exit != 0 {
		t.Errorf("a server with no client: %+v server %+v client %+v", c, c.Server, c.Client)
	}
}

// TestFabtestsSource: FABTESTS_SRC's forms, and what is not one.
func TestFabtestsSource(t *testing.T) {
	d := t.TempDir()
	lf := filepath.Join(d, "libfabric")
	os.MkdirAll(filepath.Join(lf, "fabtests", "common"), 0o755)
	os.WriteFile(filepath.Join(lf, "fabtests", "common", "shared.c"), nil, 0o644)
	bare := filepath.Join(d, "repo")
	os.MkdirAll(filepath.Join(bare, "objects"), 0o755)
	os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	for _, tc := range []struct{ src, want string }{
		{lf, filepath.Join(lf, "fabtests")},
		{filepath.Join(lf, "fabtests"), filepath.Join(lf, "fabtests")},
		{bare, bare + "@v" + fabtestsVersion},
		{bare + "@v1.17.1", bare + "@v1.17.1"},
	} {
		s, err := resolveFabtestsSource(tc.src)
		if err != nil || s.String() != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.src, s, err, tc.want)
		}
	}
	for _, bad := range []string{d, filepath.Join(d, "none"), lf + "@v1.17.0"} {
		if s, err := resolveFabtestsSource(bad); err == nil {
			t.Errorf("%s accepted as %v", bad, s)
		}
	}
}
