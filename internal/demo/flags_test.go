package demo

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/internal/cli"
)

// TestRateFlags: the demos' rate flags take a rate with a unit as tc
// writes it (200Mbit), a bare number of bits/s still, and refuse one out
// of range in the same units, as a usage error before anything needs
// root. Each refusal case carries a second bad flag checked after the
// rate, so a missing rate check fails the test instead of running a demo.
func TestRateFlags(t *testing.T) {
	var out strings.Builder
	if err := Run([]string{"-topology", "incast", "-rate", "1Gbit", "-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("incast -rate 1Gbit -h: %v", err)
	}
	if !strings.Contains(out.String(), "(default 200Mbit)") {
		t.Errorf("incast -h does not show -rate's default as a rate:\n%s", out.String())
	}
	for args, want := range map[string]string{
		"-topology incast -rate 500kbit -backend bogus":         "-rate 500kbit: want a rate from 1Mbit to 100Gbit",
		"-topology incast -rate 200Gb/s -backend bogus":         "-rate 200Gbit: want a rate from 1Mbit to 100Gbit",
		"-topology incast -rate 200000000 -backend bogus":       `-backend "bogus"`,
		"-topology incast -rate 200Mbit -backend bogus":         `-backend "bogus"`,
		"-topology incast -rate fast":                           `"fast" is not a bit rate`,
		"-topology leafspine -spine-rate 500kbit -before 1ms":   "-spine-rate 500kbit: want a rate from 1Mbit to 1000Gbit",
		"-topology leafspine -spine-rate 250Mbit -cut sideways": `-cut "sideways": want blackhole or linkdown`,
		"-topology leafspine -spine-rate 250000000 -before 1ms": "-before 1ms",
		"-topology planes -planes 9":                            "-planes",
		"-topology planes -cut-plane 2":                         "-cut-plane",
		"-topology planes -before 10ms":                         "-before 10ms",
	} {
		err := Run(strings.Fields(args), &out)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a usage error saying %q", args, err, want)
		}
	}
}

// TestTopologyHelp: every topology's -h says what -topology takes, the
// same way: all seven names, where each one's flags are.
func TestTopologyHelp(t *testing.T) {
	for _, topo := range []string{"star", "leafspine", "incast", "libfabric", "mpi", "conns", "planes"} {
		var out strings.Builder
		if err := Run([]string{"-topology", topo, "-h"}, &out); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("-topology %s -h: %v", topo, err)
		}
		_, help, _ := strings.Cut(out.String(), "  -topology")
		help, _, _ = strings.Cut(help, "\n  -")
		for _, want := range []string{"star (", "leafspine (", "incast (", "libfabric (", "mpi (", "conns (", "planes (", "-topology NAME -h", `(default "` + topo + `")`} {
			if !strings.Contains(help, want) {
				t.Errorf("-topology %s -h: the -topology help lacks %q:\n%s", topo, want, help)
			}
		}
	}
	if err := Run([]string{"-topology", "torus"}, new(strings.Builder)); !errors.Is(err, cli.ErrUsage) ||
		!strings.Contains(err.Error(), "want star, leafspine, incast, libfabric, mpi, conns or planes") {
		t.Errorf("-topology torus: %v", err)
	}
}

// TestCCFlag: the star demo, its sweep and the leaf-spine demo refuse a
// controller the daemons do not have, naming the flag and the ones they
// have, before anything needs root.
func TestCCFlag(t *testing.T) {
	for _, args := range []string{"-cc bogus", "-sweep -cc bogus", "-topology leafspine -cc bogus"} {
		err := Run(strings.Fields(args), io.Discard)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), `-cc "bogus": want one of`) || !strings.Contains(err.Error(), "metaroce") {
			t.Errorf("%s: %v; want a usage error listing the controllers", args, err)
		}
	}
}
