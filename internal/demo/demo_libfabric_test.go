package demo

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibfabricDemoJSON builds the metaroce provider, runs a short
// `demo -topology libfabric -json` (metaroce and tcp at 1% loss) and checks
// the JSON: metaroce passed with data checked and every size has figures.
func TestLibfabricDemoJSON(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the demo needs root (network namespaces)")
	}
	if _, err := exec.LookPath("fi_pingpong"); err != nil {
		t.Skip("no fi_pingpong (libfabric-bin)")
	}
	if _, err := os.Stat("/usr/include/rdma/fabric.h"); err != nil {
		t.Skip("no libfabric headers (libfabric-dev)")
	}
	dir := t.TempDir()
	root := filepath.Join("..", "..", "libmetaroce")
	srcs, _ := filepath.Glob(filepath.Join(root, "src", "*.c"))
	prov, _ := filepath.Glob(filepath.Join(root, "fabric", "*.c"))
	args := append(append([]string{"-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared", "-I" + filepath.Join(root, "include"),
		"-o", filepath.Join(dir, "libmetaroce-fi.so")}, prov...), srcs...)
	if b, err := exec.Command("cc", append(args, "-lfabric", "-lpthread")...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, b)
	}
	var out bytes.Buffer
	err := Run(strings.Fields("-topology libfabric -json -iterations 20 -loss 0.01 -providers metaroce,tcp -provider-dir "+dir), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r LibfabricResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !r.OK || len(r.Runs) != 2 {
		t.Fatalf("result %+v", r)
	}
	m := r.Runs[0]
	if m.Provider != "metaroce" || !m.Pass || m.Loss != 0.01 || len(m.Rows) < 4 {
		t.Errorf("metaroce run %+v", m)
	}
	for _, row := range m.Rows {
		if row.Bytes <= 0 || row.UsPerXfer <= 0 || row.MBps <= 0 {
			t.Errorf("row without figures %+v", row)
		}
	}
	t.Logf("%s", out.String())
}
