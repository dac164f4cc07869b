package config

import (
	"os"
	"strings"
	"testing"
)

// base is the smallest file that validates.
const base = "interfaces: [{name: eth0}]\n"

// valid returns the configuration base parses to, before validation.
func valid() Config {
	c := Defaults()
	c.Interfaces = []Interface{DefaultInterface("eth0")}
	return c
}

func mustParse(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("Parse(%q): %v", yaml, err)
	}
	return c
}

// parseErr parses yaml, which must fail, and returns the error's lines.
func parseErr(t *testing.T, yaml string) []string {
	t.Helper()
	_, err := Parse([]byte(yaml), "test.yaml")
	if err == nil {
		t.Fatalf("Parse(%q) succeeded", yaml)
	}
	return strings.Split(err.Error(), "\n")
}

// clone deep-copies c.
func clone(c *Config) *Config {
	d := *c
	d.Interfaces = append([]Interface(nil), c.Interfaces...)
	for i := range d.Interfaces {
		d.Interfaces[i].Queues = append([]int(nil), d.Interfaces[i].Queues...)
	}
	return &d
}

func readExample(tb testing.TB) []byte {
	tb.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}
