package telemetry

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardMetrics: deploy/grafana/metaroced.json is valid JSON and
// every metaroce_ metric its queries name is one the collector exports,
// so a renamed metric cannot leave a dashboard panel silently empty.
func TestDashboardMetrics(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/metaroced.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, desc := range allDescs {
		// Desc's String is the only accessor: fqName: "name", ...
		m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(desc.String())
		known[m[1]] = true
	}
	re := regexp.MustCompile(`metaroce_[a-z_]+`)
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range re.FindAllString(tg.Expr, -1) {
				n++
				base := name
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					if s, ok := strings.CutSuffix(name, suf); ok && known[s] {
						base = s
					}
				}
				if !known[base] {
					t.Errorf("panel %q: %s is not exported", p.Title, name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("dashboard queries no metaroce_ metric")
	}

	// PromQL syntax: every query, with Grafana's variables filled in, as a
	// recording rule for promtool check rules.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skip("promtool not installed (Debian package prometheus; make deps installs it): PromQL not checked")
		}
		t.Fatal("promtool not installed: install the Debian package prometheus (make deps)")
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			expr, _ := json.Marshal(vars.Replace(tg.Expr)) // a JSON string is a YAML string
			fmt.Fprintf(&rules, "      - record: dashboard:panel%d:%d\n        expr: %s\n", len(rules.String()), i, expr)
		}
	}
	f := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s\n%s", err, out, rules.String())
	}
}
