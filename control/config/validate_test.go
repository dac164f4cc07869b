package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestPlaneInterfaces: plane_interfaces makes the interfaces the planes of
// one endpoint, and transport.planes follows their number.
func TestPlaneInterfaces(t *testing.T) {
	c, err := Parse([]byte("plane_interfaces: true\ninterfaces:\n  - name: pa\n    queues: [0, 1]\n  - name: pb\n    queues: [0, 1]\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	if !c.PlaneInterfaces || c.Transport.Planes != 2 || c.TransportConfig().Planes != 2 {
		t.Fatalf("plane_interfaces %v, transport planes %d", c.PlaneInterfaces, c.Transport.Planes)
	}
	c, err = Parse([]byte("interfaces:\n  - name: pa\n  - name: pb\n"), "test")
	if err != nil || c.PlaneInterfaces || c.Transport.Planes != 1 {
		t.Fatalf("without the key: %v, planes %d", err, c.Transport.Planes)
	}
}

func TestValidateErrors(t *testing.T) {
	two := func(c *Config) { c.Interfaces = append(c.Interfaces, DefaultInterface("eth1")) }
	ifc := func(f func(*Interface)) func(*Config) { return func(c *Config) { f(&c.Interfaces[0]) } }
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"no interfaces", func(c *Config) { c.Interfaces = nil },
			"interfaces: at least one interface is required"},
		{"name missing", ifc(func(i *Interface) { i.Name = "" }),
			"interfaces[0].name: required"},
		{"name too long", ifc(func(i *Interface) { i.Name = "abcdefghijklmnop" }),
			`interfaces[0].name: "abcdefghijklmnop" is not a Linux interface name`},
		{"name with slash", ifc(func(i *Interface) { i.Name = "eth/0" }),
			`interfaces[0].name: "eth/0" is not a Linux interface name`},
		{"name with colon", ifc(func(i *Interface) { i.Name = "eth0:1" }),
			`interfaces[0].name: "eth0:1" is not a Linux interface name`},
		{"name with space", ifc(func(i *Interface) { i.Name = "eth 0" }),
			`interfaces[0].name: "eth 0" is not a Linux interface name`},
		{"name dot", ifc(func(i *Interface) { i.Name = ".." }),
			`interfaces[0].name: ".." is not a Linux interface name`},
		{"one plane", func(c *Config) { c.PlaneInterfaces = true },
			"plane_interfaces: 1 interfaces: a host of planes has 2..8, one per plane"},
		{"planes with other queues", func(c *Config) { two(c); c.PlaneInterfaces = true; c.Interfaces[1].Queues = []int{0, 1} },
			"interfaces[1].queues: [0 1]: with plane_interfaces every plane lists interfaces[0]'s queues [0] (engine i owns the i-th queue of every plane)"},
		{"planes with other backends", func(c *Config) { two(c); c.PlaneInterfaces = true; c.Interfaces[1].Backend = BackendUDP },
			"interfaces[1].backend: udp: with plane_interfaces every plane uses interfaces[0]'s backend auto"},
		{"planes against transport.planes", func(c *Config) { two(c); c.PlaneInterfaces = true; c.Transport.Planes = 3 },
			"transport.planes: 3, but plane_interfaces makes the 2 interfaces the planes"},
		{"duplicate interface", func(c *Config) { two(c); c.Interfaces[1].Name = "eth0" },
			"interfaces[1].name: duplicate interface eth0 (also interfaces[0])"},
		{"negative queue", ifc(func(i *Interface) { i.Queues = []int{-1} }),
			"interfaces[0].queues: -1 is not a queue number (0..65535)"},
		{"huge queue", ifc(func(i *Interface) { i.Queues = []int{1 << 16} }),
			"interfaces[0].queues: 65536 is not a queue number (0..65535)"},
		{"duplicate queue", func(c *Config) { two(c); c.Interfaces[1].Queues = []int{1, 3, 2, 3} },
			"interfaces[1].queues: duplicate queue 3"},
		{"backend", ifc(func(i *Interface) { i.Backend = "xdp" }),
			`interfaces[0].backend: "xdp" is not one of afxdp, udp, auto`},
		{"xdp mode", ifc(func(i *Interface) { i.XDPMode = "skb" }),
			`interfaces[0].xdp_mode: "skb" is not one of auto, native, generic`},
		{"zerocopy", ifc(func(i *Interface) { i.Zerocopy = "yes" }),
			`interfaces[0].zerocopy: "yes" is not one of auto, on, off`},
		{"xdp mode with udp", ifc(func(i *Interface) { i.Backend, i.XDPMode = BackendUDP, XDPNative }),
			"interfaces[0].xdp_mode: native applies only to the afxdp backend"},
		{"zerocopy with udp", ifc(func(i *Interface) { i.Backend, i.Zerocopy = BackendUDP, ZerocopyOff }),
			"interfaces[0].zerocopy: off applies only to the afxdp backend"},
		{"zerocopy with generic", ifc(func(i *Interface) { i.XDPMode, i.Zerocopy = XDPGeneric, ZerocopyOn }),
			"interfaces[0].zerocopy: on needs native XDP: generic XDP always copies"},
		{"mapped address", ifc(func(i *Interface) { i.Address = netip.MustParseAddr("::ffff:10.0.0.1") }),
			"interfaces[0].address: ::ffff:10.0.0.1 is an IPv4-mapped address; write 10.0.0.1"},
		{"unspecified address", ifc(func(i *Interface) { i.Address = netip.IPv6Unspecified() }),
			"interfaces[0].address: :: is not a unicast address"},
		{"multicast address", ifc(func(i *Interface) { i.Address = netip.MustParseAddr("239.1.1.1") }),
			"interfaces[0].address: 239.1.1.1 is not a unicast address"},
		{"shared address", func(c *Config) {
			two(c)
			c.Interfaces[0].Address = netip.MustParseAddr("10.0.0.1")
			c.Interfaces[1].Address = netip.MustParseAddr("10.0.0.1")
		}, "interfaces[1].address: 10.0.0.1 is also interfaces[0]'s"},
		{"port 0", func(c *Config) { c.Port = 0 }, "port: 0 is not a valid UDP port"},
		{"port too big", func(c *Config) { c.Port = 65536 }, "port: 65536 is not a valid UDP port"},
		{"mtu 0", func(c *Config) { c.MTU = 0 }, "mtu: 0 is not a valid MTU"},
		{"mtu small", func(c *Config) { c.MTU = 500 }, "mtu: mtu 500: want 576..9216"},
		{"mtu big", func(c *Config) { c.MTU = 9217 }, "mtu: mtu 9217: want 576..9216"},
		{"paths 0", func(c *Config) { c.Paths = 0 }, "paths: 0: want at least 1"},
		{"paths big", func(c *Config) { c.Paths = 257 }, "paths: paths 257: want 1..256"},
		{"congestion", func(c *Config) { c.Congestion = "cubic" },
			`congestion: unknown algorithm "cubic" (want one of metaroce, dcqcn, receiver-hint, none)`},
		{"dscp data", func(c *Config) { c.DSCPData = 64 }, "dscp_data: 64 is not a DSCP value (0..63)"},
		{"dscp control", func(c *Config) { c.DSCPControl = -1 }, "dscp_control: -1 is not a DSCP value (0..63)"},
		{"socket empty", func(c *Config) { c.ControlSocket = "" }, "control_socket: empty"},
		{"socket relative", func(c *Config) { c.ControlSocket = "run/x.sock" },
			`control_socket: "run/x.sock" is not an absolute path`},
		{"socket unclean", func(c *Config) { c.ControlSocket = "/run//x.sock" },
			`control_socket: "/run//x.sock" is not a clean path (want "/run/x.sock")`},
		{"socket long", func(c *Config) { c.ControlSocket = "/" + strings.Repeat("x", 107) },
			`control_socket: "/` + strings.Repeat("x", 107) + `" is longer than the 107 bytes a Unix socket path may have`},
		{"mode bits", func(c *Config) { c.SocketMode = 0o1770 }, "socket_mode: 01770 has bits beyond 0777"},
		{"mode unwritable", func(c *Config) { c.SocketMode = 0o444 },
			"socket_mode: 0444 lets no one connect: connecting needs write permission"},
		{"group", func(c *Config) { c.SocketGroup = "rdma users" }, `socket_group: "rdma users" is not a group name`},
		{"group long", func(c *Config) { c.SocketGroup = strings.Repeat("g", 33) },
			`socket_group: "` + strings.Repeat("g", 33) + `" is not a group name`},
		{"metrics no port", func(c *Config) { c.MetricsAddress = "localhost" },
			`metrics_address: "localhost" is not host:port`},
		{"metrics port 0", func(c *Config) { c.MetricsAddress = "127.0.0.1:0" },
			`metrics_address: "127.0.0.1:0": "0" is not a TCP port`},
		{"metrics port name", func(c *Config) { c.MetricsAddress = "127.0.0.1:http" },
			`metrics_address: "127.0.0.1:http": "http" is not a TCP port`},
		{"metrics host", func(c *Config) { c.MetricsAddress = "a b:80" },
			`metrics_address: "a b:80": "a b" is not a host`},
		{"log level", func(c *Config) { c.LogLevel = "verbose" },
			`log_level: "verbose" is not one of debug, info, warn, error`},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, `log_format: "xml" is not one of text, json`},
		{"max sessions", func(c *Config) { c.Limits.MaxSessions = 0 }, "limits.max_sessions: 0: want at least 1"},
		{"max regions", func(c *Config) { c.Limits.MaxRegionsPerSession = -1 },
			"limits.max_regions_per_session: -1: want at least 1"},
		{"max region bytes", func(c *Config) { c.Limits.MaxRegionBytesPerSession = 0 },
			"limits.max_region_bytes_per_session: 0: want at least 1"},
		{"max qps", func(c *Config) { c.Limits.MaxQPsPerSession = 0 }, "limits.max_qps_per_session: 0: want at least 1"},

		// The transport's own rules, under the keys they concern.
		{"pacing burst", func(c *Config) { c.Transport.PacingBurst = 2 * time.Millisecond },
			"transport.pacing_burst: pacing burst 2ms: want 0..1ms"},
		{"send window", func(c *Config) { c.Transport.SendWindow = -1 },
			"transport.send_window: send window -1: want 1..65536"},
		{"recv window", func(c *Config) { c.Transport.RecvWindow = 1000 },
			"transport.recv_window: recv window 1000: want a power of two up to 65536"},
		{"msg window", func(c *Config) { c.Transport.MsgWindow = 3 },
			"transport.msg_window: message window 3: want a power of two up to 32768"},
		{"recv queue", func(c *Config) { c.Transport.RecvQueue = 3 },
			"transport.recv_queue: receive queue 3: want a power of two up to 65536"},
		{"max streams", func(c *Config) { c.Transport.MaxStreams = -1 },
			"transport.max_streams: max streams -1: want 1..65536"},
		{"max path id", func(c *Config) { c.Transport.MaxPathID = 8 },
			"transport.max_path_id: max path id 8: want paths..65536"},
		{"path ring", func(c *Config) { c.Transport.PathRing = 512 },
			"transport.path_ring: path ring 512: want a power of two up to 256"},
		{"ack every", func(c *Config) { c.Transport.AckEvery = -1 },
			"transport.ack_every, transport.ack_delay: ack coalescing -1 packets / 10µs: want >= 1 and >= 0"},
		{"reorder packets", func(c *Config) { c.Transport.ReorderPackets = 256 },
			"transport.reorder_packets: reorder packets 256: want 1..255"},
		{"reorder fraction", func(c *Config) { c.Transport.ReorderFraction = 5 },
			"transport.reorder_fraction: reorder fraction 5: want 0..4"},
		{"rto", func(c *Config) { c.Transport.MinRTO = time.Second },
			"transport.initial_rto, transport.min_rto, transport.max_rto: rto bounds initial 1ms min 1s max 100ms: want 0 < min <= initial <= max"},
		{"retries", func(c *Config) { c.Transport.ConnectRetries = -1 },
			"transport.max_retries, transport.rnr_retries, transport.connect_retries: retry limits must be >= 1"},
		{"entropy", func(c *Config) { c.Transport.EntropyMin = 100 },
			"transport.entropy_min, transport.entropy_max: entropy range 100..65535: want 1024 <= min <= max"},
		// What the transport leaves out.
		{"rnr delay", func(c *Config) { c.Transport.RNRDelay = -1 },
			"transport.rnr_delay: negative (0 means the transport's default)"},
		{"connect timeout", func(c *Config) { c.Transport.ConnectTimeout = -1 },
			"transport.connect_timeout: negative (0 means the transport's default)"},
		{"cookie lifetime", func(c *Config) { c.Transport.CookieLifetime = -1 },
			"transport.cookie_lifetime: negative (0 means the transport's default)"},
		{"reset rate", func(c *Config) { c.Transport.ResetRate = -1 },
			"transport.reset_rate: negative (0 means the transport's default)"},
		{"max conns", func(c *Config) { c.Transport.MaxConns = -1 },
			"transport.max_conns: negative (0 means the transport's default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mut(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate succeeded; want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Every transport message this package knows has a key, and a message it
// does not know still names the section.
func TestTransportKeys(t *testing.T) {
	if got := transportKey("something new 3: want 4"); got != "transport" {
		t.Errorf("unknown message under %q", got)
	}
	for _, k := range transportKeys {
		if got := transportKey(k.prefix + "1"); got != k.key {
			t.Errorf("%q under %q, want %q", k.prefix, got, k.key)
		}
	}
}

func TestValidateCollectsAll(t *testing.T) {
	c := valid()
	c.Port, c.LogLevel, c.Interfaces[0].Queues = 0, "loud", []int{1, 1}
	c.Transport.RecvWindow = 3
	err := c.Validate()
	want := []string{
		"interfaces[0].queues: duplicate queue 1",
		"port: 0 is not a valid UDP port",
		`log_level: "loud" is not one of debug, info, warn, error`,
		"transport.recv_window: recv window 3: want a power of two up to 65536",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

func TestValidateFillsInterfaceDefaults(t *testing.T) {
	c := valid()
	c.Interfaces = []Interface{{Name: "eth3"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Interfaces[0], DefaultInterface("eth3"); !sameInterface(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestValidateIdempotent(t *testing.T) {
	c := valid()
	c.MTU, c.Transport.SendWindow, c.Transport.AckDelay = 9000, 0, 0
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := clone(&c)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&c, d) {
		t.Errorf("second Validate changed the config:\n%+v\n%+v", c, *d)
	}
	// The top-level keys win over whatever Transport held.
	d.MTU = 4000
	if err := d.Validate(); err != nil || d.TransportConfig().MTU != 4000 {
		t.Errorf("mtu 4000: %v, transport mtu %d", err, d.TransportConfig().MTU)
	}
}

func TestKnownCongestionHook(t *testing.T) {
	defer func(old func(string) bool) { KnownCongestion = old }(KnownCongestion)
	KnownCongestion = func(name string) bool { return name == "swift" }
	c := valid()
	c.Congestion = "swift"
	if err := c.Validate(); err != nil {
		t.Errorf("swift with the hook: %v", err)
	}
	c.Congestion = "metaroce"
	if err := c.Validate(); err == nil || err.Error() != `congestion: unknown algorithm "metaroce"` {
		t.Errorf("metaroce without it in the registry: %v", err)
	}
	KnownCongestion = nil
	for _, name := range builtinCongestion {
		c.Congestion = name
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
