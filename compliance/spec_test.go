package compliance

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestSpecAndSuiteAgree parses docs/spec.md's clause headings and fails if
// a normative leaf clause has neither a case nor a NotCovered entry, if a
// case or entry names a clause the spec does not have, or if a title in
// ClauseTitles differs from its heading.
func TestSpecAndSuiteAgree(t *testing.T) {
	f, err := os.Open("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	clauses, err := ParseClauses(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(clauses) < 50 {
		t.Fatalf("parsed only %d clauses from docs/spec.md", len(clauses))
	}
	byID := map[string]Clause{}
	for _, c := range clauses {
		byID[c.ID] = c
	}
	covered := map[string][]string{}
	for _, c := range Cases {
		for _, id := range append([]string{c.Clause}, c.Also...) {
			if _, ok := byID[id]; !ok {
				t.Errorf("case %s cites §%s, which docs/spec.md does not have", c.ID, id)
			}
			covered[id] = append(covered[id], c.ID)
		}
		if byID[c.Clause].Informative {
			t.Errorf("case %s's main clause §%s is informative", c.ID, c.Clause)
		}
	}
	notCovered := func(id string) (string, bool) {
		for _, n := range NotCovered {
			if n.Clause == id || strings.HasSuffix(n.Clause, ".*") && strings.HasPrefix(id, strings.TrimSuffix(n.Clause, "*")) {
				return n.Reason, true
			}
		}
		return "", false
	}
	for _, n := range NotCovered {
		id := strings.TrimSuffix(n.Clause, ".*")
		c, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("not-covered entry §%s names no clause of docs/spec.md", n.Clause)
		case c.Informative:
			t.Errorf("not-covered entry §%s is informative: no entry needed", n.Clause)
		case len(covered[id]) > 0 && c.Leaf:
			t.Errorf("§%s has cases %v and a not-covered entry", id, covered[id])
		case n.Reason == "":
			t.Errorf("not-covered entry §%s gives no reason", n.Clause)
		}
	}
	normative, withCase := 0, 0
	for _, c := range clauses {
		if c.Informative || !c.Leaf {
			continue
		}
		normative++
		if len(covered[c.ID]) > 0 {
			withCase++
			continue
		}
		if _, ok := notCovered(c.ID); !ok {
			t.Errorf("normative §%s %q has no case and no not-covered entry", c.ID, c.Title)
		}
	}
	for id, title := range ClauseTitles {
		if c, ok := byID[id]; !ok || c.Title != title {
			t.Errorf("ClauseTitles[%q] = %q, docs/spec.md has %q", id, title, c.Title)
		}
	}
	for _, c := range Cases {
		if _, ok := ClauseTitles[c.Clause]; !ok {
			t.Errorf("case %s: §%s missing from ClauseTitles", c.ID, c.Clause)
		}
	}
	t.Logf("%d cases; %d normative leaf clauses, %d with cases, %d listed as not covered", len(Cases), normative, withCase, normative-withCase)
	if len(Cases) < 60 {
		t.Errorf("%d cases, want at least 60", len(Cases))
	}
}

// TestCaseIDsUnique: ids name cases in reports, the JSON and -run.
func TestCaseIDsUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cases {
		if seen[c.ID] || c.ID == "" || c.Title == "" || c.Run == nil {
			t.Errorf("case %q: duplicate or incomplete", c.ID)
		}
		seen[c.ID] = true
	}
}

func TestParseClauses(t *testing.T) {
	in := "# Title\n\nContents\n\n## 1. Scope\n### 1.1 A\n### 1.2 B (informative)\n#### 1.2.1 C\n```\n## 9. in a fence\n```\n## 2. D (informative)\n### 2.1 E\n#### 2.1.1 F\n## 3. G\n"
	cs, err := ParseClauses(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, c := range cs {
		s := c.ID
		if c.Informative {
			s += "i"
		}
		if c.Leaf {
			s += "l"
		}
		got = append(got, s)
	}
	want := "1 1.1l 1.2i 1.2.1il 2i 2.1i 2.1.1il 3l"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, " "), want)
	}
}

// FuzzParseClauses: the parser never fails on text, ids are dotted
// numbers, nesting inherits "informative", and rendering the clauses as
// headings and parsing them again gives the same clauses.
func FuzzParseClauses(f *testing.F) {
	if b, err := os.ReadFile("../docs/spec.md"); err == nil {
		f.Add(string(b[:min(len(b), 8000)]))
	}
	f.Add("## 1. A\n### 1.1 B (informative)\n#### 1.1.1 C\n")
	f.Add("```\n## 2. fenced\n```\n### 3.4\n#######7 x\n## 1..2 y\n")
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseClauses(strings.NewReader(s))
		if err != nil {
			return // a line longer than the scanner's buffer
		}
		var b strings.Builder
		for i, c := range cs {
			for _, part := range strings.Split(c.ID, ".") {
				if part == "" || strings.Trim(part, "0123456789") != "" {
					t.Fatalf("clause id %q", c.ID)
				}
			}
			for j := i - 1; j >= 0; j-- {
				if strings.HasPrefix(c.ID, cs[j].ID+".") {
					if cs[j].Informative && !c.Informative {
						t.Fatalf("§%s nested in informative §%s is not informative", c.ID, cs[j].ID)
					}
					break
				}
			}
			title := c.Title
			if title == "" {
				title = "x"
			}
			b.WriteString("### " + c.ID + " " + title + "\n")
		}
		again, err := ParseClauses(strings.NewReader(b.String()))
		if err != nil || len(again) != len(cs) {
			t.Fatalf("re-parse: %d clauses, want %d (%v)", len(again), len(cs), err)
		}
		for i := range cs {
			if again[i].ID != cs[i].ID || again[i].Informative != cs[i].Informative || again[i].Leaf != cs[i].Leaf {
				t.Fatalf("re-parse of %+v gave %+v", cs[i], again[i])
			}
		}
	})
}

// TestVectorsAreTheSpecs: the vectors the suite sends are §12.3's, byte
// for byte, under the same clause numbers and titles.
func TestVectorsAreTheSpecs(t *testing.T) {
	f, err := os.Open("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vs, err := ParseVectors(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(specVectors) {
		t.Fatalf("docs/spec.md has %d vectors, the suite %d", len(vs), len(specVectors))
	}
	for i, v := range vs {
		sv := specVectors[i]
		if v.Name != sv.Name || hex.EncodeToString(v.Hex) != sv.Hex {
			t.Errorf("vector %d: spec %s %x, suite %s %s", i, v.Name, v.Hex, sv.Name, sv.Hex)
		}
		if !strings.Contains(sv.Title, "`"+v.Name+"`") {
			t.Errorf("vector %s filed under %q", v.Name, sv.Title)
		}
	}
}

// FuzzParseVectors: no panic on any text; what parses re-renders into
// vector blocks that parse to the same vectors.
func FuzzParseVectors(f *testing.F) {
	f.Add("```vector\nname: x\nhex: 0000  01 02\nhex: 0002  03\n```\n")
	f.Add("```vector\nhex: 0001  01\n```\n")
	f.Add("```vector\nname: y\nhex: zz 01\n")
	f.Fuzz(func(t *testing.T, s string) {
		vs, err := ParseVectors(strings.NewReader(s))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, v := range vs {
			b.WriteString("```vector\nname: " + v.Name + "\n")
			for off := 0; off < len(v.Hex); off += 16 {
				fmt.Fprintf(&b, "hex: %04x ", off)
				for _, x := range v.Hex[off:min(off+16, len(v.Hex))] {
					fmt.Fprintf(&b, " %02x", x)
				}
				b.WriteString("\n")
			}
			b.WriteString("```\n")
		}
		again, err := ParseVectors(strings.NewReader(b.String()))
		if err != nil || len(again) != len(vs) {
			t.Fatalf("re-parse: %v, %d vectors, want %d", err, len(again), len(vs))
		}
		for i := range vs {
			if again[i].Name != strings.TrimSpace(vs[i].Name) || string(again[i].Hex) != string(vs[i].Hex) {
				t.Fatalf("re-parse of %+v gave %+v", vs[i], again[i])
			}
		}
	})
}
