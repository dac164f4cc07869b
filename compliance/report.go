package compliance

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is a run's outcome.
type Report struct {
	Target     string         `json:"target"`
	Clauses    []ClauseResult `json:"clauses"`
	Cases      []Result       `json:"cases"`
	Passed     int            `json:"passed"`
	Failed     int            `json:"failed"`
	Skipped    int            `json:"skipped"`
	Warned     int            `json:"warned"`
	XFailed    int            `json:"xfailed"`
	Failures   []Failure      `json:"failures"`
	NotCovered []NotCoveredOn `json:"not_covered"`
	Seconds    float64        `json:"seconds"`
}

// ClauseResult sums a clause's cases.
type ClauseResult struct {
	Clause  string `json:"clause"`
	Title   string `json:"title"`
	Cases   int    `json:"cases"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
	Warned  int    `json:"warned"`
	XFailed int    `json:"xfailed"`
	Status  string `json:"status"`
}

// Failure is a failed case: its clause and why.
type Failure struct {
	Case   string `json:"case"`
	Clause string `json:"clause"`
	Reason string `json:"reason"`
}

// NotCoveredOn is a normative clause without a case, and why.
type NotCoveredOn struct {
	Clause string `json:"clause"`
	Reason string `json:"reason"`
}

func (r *Report) finish(d time.Duration) {
	r.Seconds = d.Seconds()
	by := map[string]*ClauseResult{}
	for _, c := range r.Cases {
		cr := by[c.Clause]
		if cr == nil {
			cr = &ClauseResult{Clause: c.Clause, Title: ClauseTitles[c.Clause]}
			by[c.Clause] = cr
		}
		cr.Cases++
		switch c.Status {
		case StatusPass:
			r.Passed++
			cr.Passed++
		case StatusFail:
			r.Failed++
			cr.Failed++
			r.Failures = append(r.Failures, Failure{Case: c.ID, Clause: c.Clause, Reason: c.Reason})
		case StatusSkip:
			r.Skipped++
			cr.Skipped++
		case StatusWarn:
			r.Warned++
			cr.Warned++
		case StatusXFail:
			r.XFailed++
			cr.XFailed++
		}
	}
	for _, cr := range by {
		switch {
		case cr.Failed > 0:
			cr.Status = StatusFail
		case cr.Passed+cr.XFailed+cr.Warned == 0:
			cr.Status = StatusSkip
		case cr.Warned > 0:
			cr.Status = StatusWarn
		default:
			cr.Status = StatusPass
		}
		r.Clauses = append(r.Clauses, *cr)
	}
	sort.Slice(r.Clauses, func(i, j int) bool { return clauseLess(r.Clauses[i].Clause, r.Clauses[j].Clause) })
	for _, n := range NotCovered {
		r.NotCovered = append(r.NotCovered, NotCoveredOn{Clause: n.Clause, Reason: n.Reason})
	}
	if r.Failures == nil {
		r.Failures = []Failure{}
	}
}

// clauseLess orders "2.10" after "2.9".
func clauseLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		var x, y int
		fmt.Sscan(as[i], &x)
		fmt.Sscan(bs[i], &y)
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

// WriteTable prints the clause-by-clause table, then each failure.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "MetaRoCE v1 compliance: %s\n\n", r.Target)
	fmt.Fprintf(w, "%-8s %-52s %5s %5s %5s %5s  %s\n", "clause", "title", "cases", "pass", "fail", "skip", "status")
	for _, c := range r.Clauses {
		title := c.Title
		if len(title) > 52 {
			title = title[:49] + "..."
		}
		st := strings.ToUpper(c.Status)
		if c.XFailed > 0 {
			st += fmt.Sprintf(" (%d xfail)", c.XFailed)
		}
		if c.Warned > 0 && c.Status != StatusWarn {
			st += fmt.Sprintf(" (%d warn)", c.Warned)
		}
		fmt.Fprintf(w, "§%-7s %-52s %5d %5d %5d %5d  %s\n", c.Clause, title, c.Cases, c.Passed, c.Failed, c.Skipped, st)
	}
	fmt.Fprintf(w, "\n%d cases: %d passed, %d failed, %d skipped, %d warnings, %d expected failures (%.1f s)\n",
		len(r.Cases), r.Passed, r.Failed, r.Skipped, r.Warned, r.XFailed, r.Seconds)
	for _, c := range r.Cases {
		switch c.Status {
		case StatusFail, StatusWarn, StatusXFail, StatusSkip:
			fmt.Fprintf(w, "  %-5s §%s %s: %s\n", strings.ToUpper(c.Status), c.Clause, c.ID, c.Reason)
		}
	}
	fmt.Fprintf(w, "\nnot covered: %d normative clauses (run with -json for the reasons)\n", len(r.NotCovered))
}

// JUnit XML (the format CI systems read: testsuites > testsuite >
// testcase with failure or skipped children). One testsuite per clause.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Name    string       `xml:"name,attr"`
	Tests   int          `xml:"tests,attr"`
	Fails   int          `xml:"failures,attr"`
	Skips   int          `xml:"skipped,attr"`
	Time    float64      `xml:"time,attr"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name  string      `xml:"name,attr"`
	Tests int         `xml:"tests,attr"`
	Fails int         `xml:"failures,attr"`
	Skips int         `xml:"skipped,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	Out       string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML. Warnings and expected
// failures are reported as passed with their reason in system-out, so a
// CI gate fails only on failures.
func (r *Report) WriteJUnit(w io.Writer) error {
	js := junitSuites{Name: "metaroce-compliance " + r.Target, Tests: len(r.Cases), Fails: r.Failed, Skips: r.Skipped, Time: r.Seconds}
	idx := map[string]int{}
	for _, c := range r.Cases {
		i, ok := idx[c.Clause]
		if !ok {
			i = len(js.Suites)
			idx[c.Clause] = i
			js.Suites = append(js.Suites, junitSuite{Name: "§" + c.Clause + " " + ClauseTitles[c.Clause]})
		}
		s := &js.Suites[i]
		jc := junitCase{Name: c.ID + ": " + c.Title, Classname: "compliance.§" + c.Clause, Time: c.Seconds}
		switch c.Status {
		case StatusFail:
			jc.Failure = &junitMessage{Message: c.Reason, Text: strings.Join(c.Notes, "\n")}
			s.Fails++
		case StatusSkip:
			jc.Skipped = &junitMessage{Message: c.Reason}
			s.Skips++
		case StatusWarn, StatusXFail:
			jc.Out = c.Status + ": " + c.Reason
		}
		s.Tests++
		s.Cases = append(s.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(js); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
