package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
)

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", base + "port: 4792\nprot: 1\n",
			[]string{`test.yaml:3: unknown key "prot"`}},
		{"unknown interface key", "interfaces:\n  - name: eth0\n    queue: [1]\n",
			[]string{`test.yaml:3: unknown key "queue" in an interface`}},
		{"unknown keys in sections, all reported", base + "limits:\n  max_session: 1\ntransport:\n  ackdelay: 1ms\n",
			[]string{`test.yaml:3: unknown key "max_session" in limits`, `test.yaml:5: unknown key "ackdelay" in transport`}},
		{"key twice", base + "port: 1\nport: 2\n",
			[]string{`test.yaml:3: mapping key "port" already defined at line 2`}},
		{"wrong type", base + "port: abc\n",
			[]string{"test.yaml:2: cannot unmarshal !!str `abc` into int"}},
		{"float for an integer", base + "mtu: 1500.5\n",
			[]string{"test.yaml:2: 1500.5 is not an integer"}},
		{"float in a queue list", "interfaces: [{name: eth0, queues: [1, 2.0]}]\n",
			[]string{"test.yaml:1: 2.0 is not an integer"}},
		{"quoted number for an integer", base + "port: \"4792\"\n",
			[]string{"test.yaml:2: cannot unmarshal !!str `4792` into int"}},
		{"out of range for uint16", base + "transport: {entropy_min: 70000}\n",
			[]string{"test.yaml:2: cannot unmarshal !!int `70000` into uint16"}},
		{"interfaces not a list", "interfaces: eth0\n",
			[]string{"test.yaml:1: cannot unmarshal !!str `eth0` into a list of interfaces"}},
		{"not a mapping", "- eth0\n",
			[]string{"test.yaml:1: cannot unmarshal !!seq into a mapping of settings"}},
		{"section not a mapping", base + "limits: 5\n",
			[]string{"test.yaml:2: cannot unmarshal !!int `5` into the limits mapping"}},
		{"second document", base + "---\nport: 1\n",
			[]string{"test.yaml:2: a second YAML document; the configuration is one document"}},
		{"trailing garbage", base + "...\n] [\n",
			[]string{"test.yaml:2: did not find expected <document start>"}},
		{"syntax error", base + "\tport: 1\n",
			[]string{"test.yaml:2: found character that cannot start any token"}},
		{"bad address", "interfaces:\n  - name: eth0\n    address: 10.0.0.300\n",
			[]string{`test.yaml:3: interfaces[0].address: "10.0.0.300" is not an IP address`}},
		{"bad mode", base + "socket_mode: 0668\n",
			[]string{`test.yaml:2: socket_mode: "0668" is not an octal file mode`}},
		{"mode with high bits", base + "socket_mode: \"4755\"\n",
			[]string{`test.yaml:2: socket_mode: 4755 has bits beyond 0777 (no setuid, setgid or sticky bits on a socket)`}},
		{"empty queue list", "interfaces:\n  - name: eth0\n    queues: []\n",
			[]string{"test.yaml:3: interfaces[0].queues: empty list; leave the key out for the default [0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseErr(t, tc.yaml); !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestNullKeepsDefault(t *testing.T) {
	c := mustParse(t, base+"port:\nmetrics_address:\nlimits:\ntransport:\n  ack_delay:\n")
	d := Defaults()
	if c.Port != d.Port || c.MetricsAddress != d.MetricsAddress || c.Limits != d.Limits ||
		c.Transport.AckDelay != transport.Defaults.AckDelay {
		t.Errorf("null changed a default: %+v", c)
	}
}

func TestMetricsDisabled(t *testing.T) {
	if c := mustParse(t, base+"metrics_address: \"\"\n"); c.MetricsAddress != "" {
		t.Errorf("metrics_address %q, want disabled", c.MetricsAddress)
	}
}

func TestFileValues(t *testing.T) {
	c := mustParse(t, `
interfaces:
  - name: eth1
    queues: [3, 1, 2]
    backend: afxdp
    xdp_mode: native
    zerocopy: on        # unquoted: YAML 1.1 would make this a bool; here it is the word
    address: fe80::1%eth1
  - name: ens2f0
    backend: udp
    address: 10.1.2.3
port: 5000
mtu: 9000
paths: 64
congestion: dcqcn
dscp_data: 24
dscp_control: 46
control_socket: /var/run/m.sock
socket_mode: 0o600
socket_group: rdma
metrics_address: "[::1]:9000"
log_level: debug
log_format: json
limits: {max_sessions: 8, max_regions_per_session: 16, max_region_bytes_per_session: 1048576, max_qps_per_session: 32}
transport:
  send_window: 2048
  recv_window: 4096
  max_conns: 100
`)
	want := []Interface{
		{Name: "eth1", Queues: []int{3, 1, 2}, Backend: BackendAFXDP, XDPMode: XDPNative, Zerocopy: ZerocopyOn,
			Address: netip.MustParseAddr("fe80::1%eth1")},
		{Name: "ens2f0", Queues: []int{0}, Backend: BackendUDP, XDPMode: XDPAuto, Zerocopy: ZerocopyAuto,
			Address: netip.MustParseAddr("10.1.2.3")},
	}
	if !slices.EqualFunc(c.Interfaces, want, sameInterface) {
		t.Errorf("interfaces %+v\nwant %+v", c.Interfaces, want)
	}
	if c.Port != 5000 || c.MTU != 9000 || c.Paths != 64 || c.Congestion != "dcqcn" || c.DSCPData != 24 || c.DSCPControl != 46 {
		t.Errorf("%+v", c)
	}
	if c.ControlSocket != "/var/run/m.sock" || c.SocketMode != 0o600 || c.SocketGroup != "rdma" {
		t.Errorf("socket %q %o %q", c.ControlSocket, c.SocketMode, c.SocketGroup)
	}
	if c.MetricsAddress != "[::1]:9000" || c.LogLevel != "debug" || c.LogFormat != "json" {
		t.Errorf("metrics %q log %q %q", c.MetricsAddress, c.LogLevel, c.LogFormat)
	}
	if c.Limits != (Limits{8, 16, 1 << 20, 32}) {
		t.Errorf("limits %+v", c.Limits)
	}
	tc := c.TransportConfig()
	if tc.MTU != 9000 || tc.Paths != 64 || tc.Port != 5000 || tc.SendWindow != 2048 || tc.RecvWindow != 4096 || tc.MaxConns != 100 {
		t.Errorf("transport %+v", tc)
	}
	if tc.AckDelay != transport.Defaults.AckDelay || tc.MaxRTO != transport.Defaults.MaxRTO {
		t.Errorf("unset tunables lost their defaults: %+v", tc)
	}
}

func TestSocketModeForms(t *testing.T) {
	for _, s := range []string{"0660", "\"0660\"", "660", "0o660", "'0o660'", "00660"} {
		if c := mustParse(t, base+"socket_mode: "+s+"\n"); c.SocketMode != 0o660 {
			t.Errorf("socket_mode: %s = %o, want 660", s, c.SocketMode)
		}
	}
	for _, s := range []string{"0x1b0", "rw-rw----", "\"\"", "-660", "+660", "0o", "1_0"} {
		parseErr(t, base+"socket_mode: "+s+"\n")
	}
}

func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"10us", 10 * time.Microsecond},
		{"10µs", 10 * time.Microsecond},
		{"1.5ms", 1500 * time.Microsecond},
		{"\"2ms\"", 2 * time.Millisecond},
		{"1m30s", 90 * time.Second},
		// Zero is the transport's word for "default".
		{"0s", transport.Defaults.AckDelay},
	} {
		c := mustParse(t, base+"transport:\n  ack_delay: "+tc.in+"\n")
		if got := c.TransportConfig().AckDelay; got != tc.want {
			t.Errorf("ack_delay: %s = %v, want %v", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"10", `test.yaml:3: "10" is not a duration: want a number with a unit, as in 10us, 1ms, 10s`},
		{"10xs", `test.yaml:3: "10xs" is not a duration: want a number with a unit, as in 10us, 1ms, 10s`},
		{"1.5", `test.yaml:3: "1.5" is not a duration: want a number with a unit, as in 10us, 1ms, 10s`},
		{"[1ms]", "test.yaml:3: cannot unmarshal !!seq into time.Duration"},
		{"-1us", "test.yaml: transport.ack_every, transport.ack_delay: ack coalescing 4 packets / -1µs: want >= 1 and >= 0"},
	} {
		got := parseErr(t, base+"transport:\n  ack_delay: "+tc.in+"\n")
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("ack_delay: %s: got %q, want %q", tc.in, got, tc.want)
		}
	}
	got := parseErr(t, base+"transport:\n  rnr_delay: -5us\n")
	if want := "test.yaml: transport.rnr_delay: negative (0 means the transport's default)"; len(got) != 1 || got[0] != want {
		t.Errorf("rnr_delay: -5us: got %q, want %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(p, []byte(base+"port: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || err.Error() != p+": port: 0 is not a valid UDP port" {
		t.Errorf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "absent.yaml")); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("Load(absent): %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(base+strings.Repeat("#\n", maxFileSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big): %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
