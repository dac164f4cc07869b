package config

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func bind(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("metaroced", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

const flagFile = `
interfaces:
  - name: eth0
    queues: [0, 1]
  - name: eth1
    backend: udp
port: 5000
mtu: 9000
paths: 32
congestion: dcqcn
control_socket: /run/file.sock
metrics_address: 127.0.0.1:1000
log_level: warn
dscp_data: 10
`

func TestFlagsOverrideFile(t *testing.T) {
	f := bind(t, "-interface", "eth2,eth1", "-interface", "eth0",
		"-port", "6000", "-mtu", "1500", "-paths", "8", "-cc", "none",
		"-socket", "/run/flag.sock", "-metrics-address", "", "-log-level", "debug")
	c, err := f.Parse([]byte(flagFile), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range c.Interfaces {
		names = append(names, i.Name)
	}
	if !slices.Equal(names, []string{"eth2", "eth1", "eth0"}) {
		t.Errorf("interfaces %v", names)
	}
	// An interface the file describes keeps its settings there.
	if !slices.Equal(c.Interfaces[2].Queues, []int{0, 1}) || c.Interfaces[1].Backend != BackendUDP {
		t.Errorf("file settings lost: %+v", c.Interfaces)
	}
	if !sameInterface(c.Interfaces[0], DefaultInterface("eth2")) {
		t.Errorf("new interface %+v", c.Interfaces[0])
	}
	if c.Port != 6000 || c.MTU != 1500 || c.Paths != 8 || c.Congestion != "none" ||
		c.ControlSocket != "/run/flag.sock" || c.MetricsAddress != "" || c.LogLevel != "debug" {
		t.Errorf("flags did not override: %+v", c)
	}
	if tc := c.TransportConfig(); tc.Port != 6000 || tc.MTU != 1500 || tc.Paths != 8 {
		t.Errorf("transport did not follow the flags: %+v", tc)
	}
	if c.DSCPData != 10 {
		t.Errorf("file value without a flag lost: dscp_data %d", c.DSCPData)
	}
}

func TestFlagsNotGivenLeaveFile(t *testing.T) {
	c, err := bind(t).Parse([]byte(flagFile), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The flags' own defaults must not override the file.
	if c.Port != 5000 || c.MTU != 9000 || c.Paths != 32 || c.Congestion != "dcqcn" || len(c.Interfaces) != 2 ||
		c.ControlSocket != "/run/file.sock" || c.MetricsAddress != "127.0.0.1:1000" || c.LogLevel != "warn" {
		t.Errorf("%+v", c)
	}
}

func TestFlagsValidatedOnceAfterFile(t *testing.T) {
	// The file alone is invalid; the flag fixes it.
	if _, err := bind(t, "-port", "4792").Parse([]byte(base+"port: 0\n"), "test.yaml"); err != nil {
		t.Errorf("flag did not rescue the file: %v", err)
	}
	// And a bad flag is reported like a bad key.
	_, err := bind(t, "-port", "0").Parse([]byte(base), "test.yaml")
	if err == nil || err.Error() != "test.yaml: port: 0 is not a valid UDP port" {
		t.Errorf("-port 0: %v", err)
	}
}

func TestFlagsWithoutFile(t *testing.T) {
	c, err := bind(t, "-interface", "lo").Load("")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Interfaces = []Interface{DefaultInterface("lo")}
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	if !sameInterface(c.Interfaces[0], want.Interfaces[0]) || c.Port != want.Port || c.Transport != want.Transport {
		t.Errorf("got %+v", c)
	}
	if _, err := bind(t).Load(""); err == nil || err.Error() != "command line: interfaces: at least one interface is required" {
		t.Errorf("no file, no -interface: %v", err)
	}
}

func TestFlagsInterfaceSyntax(t *testing.T) {
	fs := flag.NewFlagSet("metaroced", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindFlags(fs)
	for _, bad := range []string{"eth0,", ",eth0", "eth0,,eth1", ""} {
		if err := fs.Set("interface", bad); err == nil || !strings.Contains(err.Error(), "empty interface name") {
			t.Errorf("-interface %q: %v", bad, err)
		}
	}
	f := bind(t, "-interface", " eth0 , eth1")
	if got := f.interfaces.String(); got != "eth0,eth1" {
		t.Errorf("-interface ' eth0 , eth1' = %q", got)
	}
	// A name given twice is Validate's to report.
	_, err := bind(t, "-interface", "eth0,eth0").Load("")
	if err == nil || err.Error() != "command line: interfaces[1].name: duplicate interface eth0 (also interfaces[0])" {
		t.Errorf("eth0,eth0: %v", err)
	}
}
