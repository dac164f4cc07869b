package bpf

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGeneratedUpToDate regenerates the bindings into a temporary directory
// with the exact //go:generate line from gen.go and compares them byte for
// byte with the committed ones. bpf2go's output is deterministic for a given
// clang: it passes -fno-ident and maps the source directory out of the debug
// info, and regenerating twice gives identical objects (checked with clang
// 14). A different clang version may produce different code from the same
// source; the failure then means "regenerate with this clang and commit".
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs bpf2go")
	}
	// Each tool and where it comes from: Debian's package, or Go's own.
	for _, tool := range [][2]string{{"go", "Go 1.26 from go.dev, /usr/local/go/bin"}, {"clang", "Debian package clang"},
		{"llvm-strip", "Debian package llvm"}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Skipf("%s not installed (%s): cannot regenerate the BPF object", tool[0], tool[1])
		}
	}
	if _, err := os.Stat("/usr/include/bpf/bpf_helpers.h"); err != nil {
		t.Skip("libbpf headers (libbpf-dev) not installed: cannot regenerate the BPF object")
	}

	// Read the source here, not only in bpf2go's process: go test's result
	// cache tracks the files the test itself opens, so an edited source
	// reruns the test instead of replaying a cached pass.
	if _, err := os.ReadFile("xdp_steer.c"); err != nil {
		t.Fatal(err)
	}
	args := generateArgs(t)
	dir := t.TempDir()
	// Options go before bpf2go's positional arguments.
	i := slices.Index(args, "github.com/cilium/ebpf/cmd/bpf2go") + 1
	args = slices.Insert(args, i, "-output-dir", dir)
	cmd := exec.Command(args[0], args[1:]...)
	// What go generate sets for the directive's command.
	cmd.Env = append(os.Environ(), "GOPACKAGE=bpf", "GOFILE=gen.go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}

	for _, name := range []string{"steer_bpfel.o", "steer_bpfel.go"} {
		fresh, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s is stale: run `go generate ./bpf/` and commit the result", name)
		}
	}
}

// generateArgs returns the command of the one //go:generate directive in
// gen.go, split on spaces (it has no quoted arguments).
func generateArgs(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "//go:generate "); ok {
			lines = append(lines, rest)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || strings.ContainsAny(lines[0], `"'$`) {
		t.Fatalf("want one //go:generate line without quotes or variables in gen.go, have %q", lines)
	}
	args := strings.Fields(lines[0])
	if !slices.Contains(args, "github.com/cilium/ebpf/cmd/bpf2go") {
		t.Fatalf("gen.go does not run bpf2go: %q", lines[0])
	}
	return args
}
