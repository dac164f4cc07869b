package compliance

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Clause is one numbered heading of docs/spec.md.
type Clause struct {
	ID    string // "7.3"
	Title string // the heading text after the number, "(informative)" included
	// Informative is set when the heading, or a heading it is nested in,
	// is marked "(informative)" (docs/spec.md's own convention).
	Informative bool
	// Leaf is set when no numbered heading is nested in this one: leaves
	// are what cases cite; a section with subclauses is covered through
	// them.
	Leaf bool
}

// ParseClauses reads the numbered headings of a spec in Markdown: lines
// "## 7. Connection management", "### 7.3 State machine ...", "#### 8.3.1
// ...". Headings without a leading clause number (the title, "Contents")
// and lines inside fenced code blocks are ignored. A clause is nested in
// the nearest earlier clause whose number is a prefix of its own.
func ParseClauses(r io.Reader) ([]Clause, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Clause
	fenced := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		id, title, ok := clauseHeading(line)
		if !ok {
			continue
		}
		c := Clause{ID: id, Title: title, Informative: strings.Contains(title, "(informative)"), Leaf: true}
		for i := len(out) - 1; i >= 0; i-- {
			if strings.HasPrefix(id, out[i].ID+".") {
				out[i].Leaf = false
				c.Informative = c.Informative || out[i].Informative
				break
			}
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// clauseHeading splits "### 7.3 State machine" into "7.3" and the title;
// a top-level "## 7. Connection management" gives "7".
func clauseHeading(line string) (id, title string, ok bool) {
	rest := strings.TrimLeft(line, "#")
	if len(rest) == len(line) || len(line)-len(rest) > 6 || !strings.HasPrefix(rest, " ") {
		return "", "", false
	}
	rest = strings.TrimSpace(rest)
	num, title, _ := strings.Cut(rest, " ")
	num = strings.TrimSuffix(num, ".")
	if num == "" {
		return "", "", false
	}
	for _, part := range strings.Split(num, ".") {
		if part == "" || len(part) > 3 {
			return "", "", false
		}
		for _, ch := range part {
			if ch < '0' || ch > '9' {
				return "", "", false
			}
		}
	}
	return num, strings.TrimSpace(title), true
}

// Vector is one packet vector of the spec's §12.3: its name and bytes.
type Vector struct {
	Name string
	Hex  []byte
}

// ParseVectors reads the ```vector blocks of a spec (§12.1): each block's
// `name:` and the bytes of its `hex:` lines (a 4-digit offset, then bytes
// in hex). A block whose hex does not parse, or whose offsets do not
// count its bytes, is an error.
func ParseVectors(r io.Reader) ([]Vector, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Vector
	var cur *Vector
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case s == "```vector":
			out = append(out, Vector{})
			cur = &out[len(out)-1]
			continue
		case strings.HasPrefix(s, "```"):
			cur = nil
			continue
		}
		if cur == nil {
			continue
		}
		if name, ok := strings.CutPrefix(s, "name: "); ok {
			cur.Name = strings.TrimSpace(name)
		}
		rest, ok := strings.CutPrefix(s, "hex: ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("line %d: hex line without an offset", line)
		}
		off, err := strconv.ParseUint(f[0], 16, 32)
		if err != nil || int(off) != len(cur.Hex) {
			return nil, fmt.Errorf("line %d: offset %q, have %d bytes", line, f[0], len(cur.Hex))
		}
		for _, b := range f[1:] {
			v, err := strconv.ParseUint(b, 16, 8)
			if err != nil || len(b) != 2 {
				return nil, fmt.Errorf("line %d: byte %q", line, b)
			}
			cur.Hex = append(cur.Hex, byte(v))
		}
	}
	return out, sc.Err()
}
