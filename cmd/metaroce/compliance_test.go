package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"testing"
)

// knownIntermittent are cases metaroced fails now and then, with what is
// known: logged, not failed, until fixed. Every other failure fails. (It
// is empty: sender-rnr-delay, once listed, was the suite NACKing a
// transmission its target had already resent, now handled in the case.)
var knownIntermittent = map[string]string{}

// TestComplianceSpawn runs the whole suite against a metaroced it spawns
// in a namespace (this test binary stands in for metaroce, TestMain in main_test.go),
// on each backend: every case must pass, and the JSON and
// JUnit outputs must carry what the issue promises.
func TestComplianceSpawn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("compliance -spawn needs root (network namespaces)")
	}
	for _, run := range []struct{ name, backend, family string }{
		{"udp", "udp", "-ipv6=false"}, {"afxdp", "afxdp", "-ipv6=false"}, {"afxdp-ipv6", "afxdp", "-ipv6"},
	} {
		t.Run(run.name, func(t *testing.T) {
			var out bytes.Buffer
			junit := filepath.Join(t.TempDir(), "compliance.xml")
			err := runCompliance([]string{"-spawn", "-backend", run.backend, run.family, "-json", "-junit", junit}, &out)
			var rep struct {
				Clauses  []map[string]any `json:"clauses"`
				Cases    []map[string]any `json:"cases"`
				Passed   *int             `json:"passed"`
				Failed   *int             `json:"failed"`
				Skipped  *int             `json:"skipped"`
				Failures []struct {
					Case, Clause, Reason string
				} `json:"failures"`
			}
			if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
				t.Fatalf("not JSON (%v; run error %v):\n%s", jerr, err, out.String())
			}
			known := 0
			for _, f := range rep.Failures {
				if why, ok := knownIntermittent[f.Case]; ok {
					t.Logf("§%s %s: %s (known intermittent: %s)", f.Clause, f.Case, f.Reason, why)
					known++
					continue
				}
				t.Errorf("§%s %s: %s", f.Clause, f.Case, f.Reason)
			}
			if err != nil && known < len(rep.Failures) {
				t.Fatal(err)
			}
			if rep.Passed == nil || rep.Failed == nil || rep.Skipped == nil || rep.Clauses == nil || rep.Failures == nil {
				t.Fatalf("JSON lacks clauses, cases, passed, failed, skipped or failures:\n%s", out.String())
			}
			if len(rep.Cases) < 60 || *rep.Failed != known {
				t.Errorf("%d cases, %d failed", len(rep.Cases), *rep.Failed)
			}
			// The only skips are the other address family's cases, and the
			// rate hint, which depends on two connections being active in
			// the same 100 us (§8.9.3), which a loaded machine may not give.
			for _, c := range rep.Cases {
				if c["status"] == "skip" && c["reason"] != "IPv4 only" && c["reason"] != "IPv6 only" && c["id"] != "ack-rate-hint" {
					t.Errorf("%s skipped: %v", c["id"], c["reason"])
				}
			}
			b, err := os.ReadFile(junit)
			if err != nil {
				t.Fatal(err)
			}
			var ju struct {
				Tests  int `xml:"tests,attr"`
				Suites []struct {
					Cases []struct{} `xml:"testcase"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(b, &ju); err != nil || ju.Tests != len(rep.Cases) || len(ju.Suites) != len(rep.Clauses) {
				t.Errorf("JUnit: %v, %d tests in %d suites, want %d in %d", err, ju.Tests, len(ju.Suites), len(rep.Cases), len(rep.Clauses))
			}
		})
	}
}
