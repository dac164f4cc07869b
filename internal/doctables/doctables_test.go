package doctables

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsCurrent runs every fenced table's commands through a freshly
// built metaroce and fails when a document's table differs from what
// they print today (regenerate with `go generate ./internal/doctables`).
func TestDocsCurrent(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "metaroce")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/metaroce").CombinedOutput(); err != nil {
		t.Fatalf("build metaroce: %v\n%s", err, out)
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	docs = append(docs, "../../README.md")
	seen := map[string]bool{}
	for _, p := range docs {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllSubmatch(doc, -1) {
			seen[string(m[1])] = true
		}
		_, changed, err := Rewrite(doc, Binary(bin))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(changed) > 0 {
			t.Errorf("%s: tables %s differ from what their commands print: run go generate ./internal/doctables", p, strings.Join(changed, ", "))
		}
	}
	for id := range Tables {
		if !seen[id] {
			t.Errorf("table %s is in Tables but fenced in no document", id)
		}
	}
}

// TestRewriteDetectsDrift: a fenced table with a changed figure is
// reported and rewritten; text outside the fences is kept.
func TestRewriteDetectsDrift(t *testing.T) {
	calls := 0
	run := func(args []string) ([]byte, error) {
		calls++
		return []byte(`{"cc":"metaroce","timeouts":1,"queue_drops":2,"queue_max_bytes":4096,"queue_p99_bytes":2048,"utilisation":0.5,"p99_over_ideal":1.25}` + "\n"), nil
	}
	doc := "before\n<!-- table incast-cc: x -->\n| stale |\n<!-- end table -->\nafter\n"
	out, changed, err := Rewrite([]byte(doc), run)
	if err != nil || len(changed) != 1 || calls != 1 {
		t.Fatalf("changed %v, calls %d, err %v", changed, calls, err)
	}
	want := "| metaroce | 1 | 2 | 4 / 2 KiB | 50.0% | 1.25 |\n"
	if !strings.Contains(string(out), want) || !strings.HasPrefix(string(out), "before\n") || !strings.HasSuffix(string(out), "after\n") {
		t.Fatalf("rewritten:\n%s", out)
	}
	if _, changed, _ := Rewrite(out, run); len(changed) != 0 {
		t.Fatalf("a current table reported as changed: %v", changed)
	}
}
