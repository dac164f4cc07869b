package compliance

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// A report built from results: sums per clause, failures listed with
// clause and reason, JSON keys as documented, JUnit that parses.
func TestReportOutputs(t *testing.T) {
	r := &Report{Target: "10.0.0.2:4792", Cases: []Result{
		{ID: "a", Clause: "7.3", Status: StatusPass},
		{ID: "b", Clause: "7.3", Status: StatusFail, Reason: "no CHALLENGE"},
		{ID: "c", Clause: "5.5", Status: StatusWarn, Reason: "SHOULD not met: port"},
		{ID: "d", Clause: "10.3", Status: StatusSkip, Reason: "no memory"},
		{ID: "e", Clause: "2.1", Status: StatusXFail, Reason: "known"},
	}}
	r.finish(time.Second)
	if r.Passed != 1 || r.Failed != 1 || r.Skipped != 1 || r.Warned != 1 || r.XFailed != 1 {
		t.Fatalf("counts %+v", r)
	}
	if len(r.Failures) != 1 || r.Failures[0].Clause != "7.3" || r.Failures[0].Reason != "no CHALLENGE" {
		t.Errorf("failures %+v", r.Failures)
	}
	var order []string
	for _, c := range r.Clauses {
		order = append(order, c.Clause+":"+c.Status)
	}
	if got := strings.Join(order, " "); got != "2.1:pass 5.5:warn 7.3:fail 10.3:skip" {
		t.Errorf("clauses %s", got)
	}
	b, _ := json.Marshal(r)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"clauses", "cases", "passed", "failed", "skipped", "failures", "not_covered"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	var x bytes.Buffer
	if err := r.WriteJUnit(&x); err != nil {
		t.Fatal(err)
	}
	var ju junitSuites
	if err := xml.Unmarshal(x.Bytes(), &ju); err != nil || ju.Tests != 5 || ju.Fails != 1 || ju.Skips != 1 || len(ju.Suites) != 4 {
		t.Errorf("JUnit %v: %+v", err, ju)
	}
	var tab bytes.Buffer
	r.WriteTable(&tab)
	if !strings.Contains(tab.String(), "FAIL  §7.3 b: no CHALLENGE") {
		t.Errorf("table:\n%s", tab.String())
	}
	if !clauseLess("2.9", "2.10") || clauseLess("10.1", "9.5") {
		t.Error("clause order")
	}
}
