package compliance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

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
