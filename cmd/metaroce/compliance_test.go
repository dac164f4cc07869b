package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"testing"
)

// TestComplianceSpawn runs the whole suite against a metaroced it spawns
// in a namespace (this test binary stands in for metaroce, TestMain in
// demo_test.go), on each backend: every case must pass, and the JSON and
// JUnit outputs must carry what the issue promises.
func TestComplianceSpawn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("compliance -spawn needs root (network namespaces)")
	}
	for _, backend := range []string{"udp", "afxdp"} {
		t.Run(backend, func(t *testing.T) {
			var out bytes.Buffer
			junit := filepath.Join(t.TempDir(), "compliance.xml")
			err := runCompliance([]string{"-spawn", "-backend", backend, "-json", "-junit", junit}, &out)
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
			for _, f := range rep.Failures {
				t.Errorf("§%s %s: %s", f.Clause, f.Case, f.Reason)
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Passed == nil || rep.Failed == nil || rep.Skipped == nil || rep.Clauses == nil || rep.Failures == nil {
				t.Fatalf("JSON lacks clauses, cases, passed, failed, skipped or failures:\n%s", out.String())
			}
			if len(rep.Cases) < 60 || *rep.Failed != 0 || *rep.Skipped != 0 {
				t.Errorf("%d cases, %d failed, %d skipped", len(rep.Cases), *rep.Failed, *rep.Skipped)
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
