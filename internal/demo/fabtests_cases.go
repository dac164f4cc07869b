package demo

// The cases of `metaroce fabtests`: read from the runfabtests.sh of the
// fabtests build being run (its bash arrays unit_tests, functional_tests,
// short_tests, standard_tests and neg_unit_tests), so the list and the
// arguments are exactly that version's, and run as runfabtests.sh runs
// them (cs_test and unit_test there).

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// fabtestsListArrays maps a runfabtests.sh test set (its -t values) to the
// bash arrays it runs. unit runs the negative unit tests after the unit
// tests, as runfabtests.sh does without -N.
var fabtestsListArrays = map[string][]string{
	"unit":       {"unit_tests", "neg_unit_tests"},
	"functional": {"functional_tests"},
	"short":      {"short_tests"},
	"standard":   {"standard_tests"},
}

// fabtestsCase is one entry of a runfabtests.sh list.
type fabtestsCase struct {
	List string // unit, functional, short, standard
	Cmd  string // as the list has it, without -p PROVIDER
	// Unit: one process on the server host (unit_test); else a server
	// and a client (cs_test).
	Unit bool
	// Neg: a negative unit test, which passes by failing with
	// -FI_ENODATA (a bogus address).
	Neg bool
	// Endpoint is the endpoint type the case asks for: rdm, msg, dgram,
	// or "" for a unit test that opens none.
	Endpoint string
}

// parseRunfabtests reads the bash arrays NAME=( "..." ... ) of a
// runfabtests.sh.
func parseRunfabtests(text string) map[string][]string {
	arrays := map[string][]string{}
	start := regexp.MustCompile(`^([a-z_]+)=\(\s*\\?\s*$`)
	item := regexp.MustCompile(`^\s*"([^"]*)"\s*\\?\s*$`)
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if cur == "" {
			if m := start.FindStringSubmatch(line); m != nil {
				cur = m[1]
				arrays[cur] = []string{}
			}
			continue
		}
		if strings.TrimSpace(line) == ")" {
			cur = ""
			continue
		}
		if m := item.FindStringSubmatch(line); m != nil {
			arrays[cur] = append(arrays[cur], m[1])
		}
	}
	return arrays
}

// fabtestsCases returns the cases of the given lists in the order
// runfabtests.sh runs them.
func fabtestsCases(script string, lists []string) ([]fabtestsCase, error) {
	b, err := os.ReadFile(script)
	if err != nil {
		return nil, err
	}
	arrays := parseRunfabtests(string(b))
	var cases []fabtestsCase
	for _, l := range lists {
		names, ok := fabtestsListArrays[l]
		if !ok {
			return nil, fmt.Errorf("fabtests: unknown list %q: want %s", l, strings.Join(fabtestsListNames(), ", "))
		}
		for _, name := range names {
			items, ok := arrays[name]
			if !ok || len(items) == 0 {
				return nil, fmt.Errorf("fabtests: %s has no %s list: not a fabtests runfabtests.sh?", script, name)
			}
			for _, cmd := range items {
				cases = append(cases, fabtestsCase{List: l, Cmd: cmd, Unit: l == "unit", Neg: name == "neg_unit_tests",
					Endpoint: fabtestsEndpoint(cmd, l == "unit")})
			}
		}
	}
	return cases, nil
}

func fabtestsListNames() []string {
	var n []string
	for k := range fabtestsListArrays {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// fabtestsEndpoint is the endpoint type a case asks for: its -e, else the
// one its program is written for (read from fabtests 1.17's sources: the
// programs below set FI_EP_MSG or FI_EP_DGRAM in their hints; every other
// client-server program sets FI_EP_RDM, or leaves the type unspecified,
// which for providers that offer only RDM, as both run here do, is RDM).
func fabtestsEndpoint(cmd string, unit bool) string {
	f := strings.Fields(cmd)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-e" {
			return f[i+1]
		}
	}
	if len(f) == 0 {
		return ""
	}
	switch f[0] {
	case "fi_msg", "fi_msg_epoll", "fi_msg_sockets", "fi_cm_data", "fi_stream_msg", "fi_msg_pingpong", "fi_msg_bw":
		return "msg"
	case "fi_dgram", "fi_dgram_waitset", "fi_dgram_pingpong", "fi_mcast":
		return "dgram"
	case "fi_getinfo_test", "fi_dom_test", "fi_eq_test", "fi_cq_test", "fi_mr_test", "fi_cntr_test", "fi_mr_cache_evict":
		return ""
	}
	return "rdm"
}

// fabtestsExcludes reads fabtests' own exclude file for a provider
// (test_configs/NAME/NAME.exclude, NAME the utility provider of "core;util"
// or the core: what runfabtests.sh skips for it by default) from the
// build's source or installed configs. Each line is a regular expression
// matched against the case's command.
func fabtestsExcludes(roots []string, prov string) ([]*regexp.Regexp, string) {
	name := prov
	if i := strings.LastIndex(prov, ";"); i >= 0 {
		name = prov[i+1:]
	}
	for _, root := range roots {
		p := filepath.Join(root, "test_configs", name, name+".exclude")
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var res []*regexp.Regexp
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if re, err := regexp.Compile(line); err == nil {
				res = append(res, re)
			}
		}
		return res, p
	}
	return nil, ""
}

func fabtestsExcluded(res []*regexp.Regexp, cmd string) bool {
	for _, re := range res {
		if re.MatchString(cmd) {
			return true
		}
	}
	return false
}

// Results of a case, as the table and the JSON write them.
const (
	ftPass   = "pass"
	ftNotRun = "notrun"
	ftFail   = "fail"
	ftHang   = "hang"
)

// Exit codes fabtests programs return for a feature the provider lacks:
// -FI_ENODATA (no fi_info matched the hints) and -FI_ENOSYS; runfabtests.sh
// reports either, from both sides of a client-server case, as Notrun.
const (
	ftENODATA = 61
	ftENOSYS  = 38
)

// ftKilled is the exit code recorded for a process the runner killed.
const ftKilled = -1

// classifyFabtests is runfabtests.sh's verdict (cs_test, unit_test) with a
// hang of its own: a case that did not finish within the timeout, both
// sides killed, is a hang rather than runfabtests.sh's Fail. client is
// ignored for a unit case.
func classifyFabtests(c fabtestsCase, server, client int, timedOut bool) string {
	if timedOut {
		return ftHang
	}
	if c.Unit {
		switch {
		case c.Neg && server == ftENODATA:
			return ftPass
		case c.Neg:
			return ftFail
		case server == ftENODATA || server == ftENOSYS:
			return ftNotRun
		case server != 0:
			return ftFail
		}
		return ftPass
	}
	switch {
	case server == ftENODATA && client == ftENODATA, server == ftENOSYS && client == ftENOSYS:
		return ftNotRun
	case server != 0 || client != 0:
		return ftFail
	}
	return ftPass
}
