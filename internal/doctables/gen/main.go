// Command gen rewrites the fenced tables of the documents it is given
// (package doctables), running each table's commands through a metaroce
// binary it builds (or -bin).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/metaroce/metaroce/internal/doctables"
)

func main() {
	bin := flag.String("bin", "", "the metaroce binary (empty: build ./cmd/metaroce)")
	flag.Parse()
	if err := run(*bin, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "doctables:", err)
		os.Exit(1)
	}
}

func run(bin string, docs []string) error {
	if bin == "" {
		dir, err := os.MkdirTemp("", "doctables-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "metaroce")
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			return fmt.Errorf("go list -m: %w", err)
		}
		b := exec.Command("go", "build", "-o", bin, "./cmd/metaroce")
		b.Dir, b.Stderr = string(root[:len(root)-1]), os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build metaroce: %w", err)
		}
	}
	for _, p := range docs {
		doc, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out, changed, err := doctables.Rewrite(doc, doctables.Binary(bin))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: %d table(s) changed %v\n", p, len(changed), changed)
	}
	return nil
}
