package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"65536": 65536, "64KiB": 64 << 10, "1MiB": 1 << 20, "4K": 4096,
		"1.5MiB": 3 << 19, "2GiB": 2 << 30, "0": 0, "9000B": 9000} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "64kb", "1.3B", "abc", "99999999999GiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	for _, n := range []int64{0, 1, 1000, 4096, 65536, 3 << 20, 5 << 30} {
		if got, err := ParseSize(FormatSize(n)); err != nil || got != n {
			t.Errorf("round trip of %d via %q: %d, %v", n, FormatSize(n), got, err)
		}
	}
}

func TestDurationNeedsUnit(t *testing.T) {
	var d time.Duration
	fs := NewFlagSet("x", &bytes.Buffer{})
	DurationVar(fs, &d, "interval", time.Second, "")
	err := Parse(fs, []string{"-interval", "2"})
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "2ms") {
		t.Fatalf("bare number: %v", err)
	}
	if err := Parse(fs, []string{"-interval", "250us"}); err != nil || d != 250*time.Microsecond {
		t.Fatalf("250us: %v, %v", d, err)
	}
}

func TestExitCodes(t *testing.T) {
	var out bytes.Buffer
	fs := NewFlagSet("x", &out)
	fs.Int("n", 1, "count")
	if c := Exit("metaroce x", Parse(fs, []string{"-h"}), &out); c != 0 {
		t.Errorf("-h exits %d", c)
	}
	if !strings.Contains(out.String(), "-n") {
		t.Errorf("-h printed %q", out.String())
	}
	var stderr bytes.Buffer
	if c := Exit("metaroce x", Parse(fs, []string{"-bogus"}), &stderr); c != 2 {
		t.Errorf("bad flag exits %d", c)
	}
	stderr.Reset()
	if c := Exit("metaroce", errors.New("metaroce: dial: refused"), &stderr); c != 1 || stderr.String() != "metaroce: dial: refused\n" {
		t.Errorf("failure: exit %d, printed %q", c, stderr.String())
	}
	if c := Exit("x", Check(Int("paths", -3, 1, 256)), &stderr); c != 2 || !strings.Contains(stderr.String(), "-paths -3: want a value in [1, 256]") {
		t.Errorf("range: exit %d, printed %q", c, stderr.String())
	}
	stderr.Reset()
	if c := Exit("x", Check(Int("count", -1, 0, 1<<30), Prob("loss", 0.5)), &stderr); c != 2 || !strings.Contains(stderr.String(), "-count -1: want a value in [0, 1073741824]") {
		t.Errorf("a large bound in full: exit %d, printed %q", c, stderr.String())
	}
	stderr.Reset()
	if c := Exit("x", CheckRate("rate", 500e3, 1e6, 100e9), &stderr); c != 2 || !strings.Contains(stderr.String(), "-rate 500kbit: want a rate from 1Mbit to 100Gbit") {
		t.Errorf("rate: exit %d, printed %q", c, stderr.String())
	}
	if err := CheckRate("rate", 1e6, 1e6, 100e9); err != nil {
		t.Errorf("rate at the bound: %v", err)
	}
	stderr.Reset()
	if c := Exit("metaroce sim", errors.New("sim: -cc \"x\": unknown"), &stderr); c != 1 || stderr.String() != "metaroce sim: -cc \"x\": unknown\n" {
		t.Errorf("stutter: exit %d, printed %q", c, stderr.String())
	}
	_ = flag.ErrHelp
}

func TestRate(t *testing.T) {
	var r uint64
	for in, want := range map[string]uint64{"250Mbit": 250e6, "1Gbit": 1e9, "400Gb/s": 400e9, "1000": 1000, "1.5Gbit": 1.5e9} {
		if err := (Rate{&r}).Set(in); err != nil || r != want {
			t.Errorf("%q: %d, %v; want %d", in, r, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1Mbit", "0"} {
		if err := (Rate{&r}).Set(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	r = 250e6
	if s := (Rate{&r}).String(); s != "250Mbit" {
		t.Errorf("String = %q", s)
	}
}
