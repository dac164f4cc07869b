package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/metaroce/metaroce/transport"
)

// KnownCongestion reports whether a congestion control algorithm of that
// name exists. The package that implements the algorithms sets it (from an
// init function), so that this package need not import it; until then, the
// built-in names metaroce, dcqcn, receiver-hint and none are accepted. Set it
// before validating, never concurrently with it.
var KnownCongestion func(name string) bool

var builtinCongestion = []string{"metaroce", "dcqcn", "receiver-hint", "none"}

// Linux limits the checks below mirror.
const (
	// ifNameMax is IFNAMSIZ less the terminating NUL.
	ifNameMax = 15
	// sunPathMax is sizeof(sockaddr_un.sun_path) less the terminating NUL.
	sunPathMax = 107
	// groupNameMax is the longest group name shadow-utils creates.
	groupNameMax = 32
	// maxQueue bounds a queue id: NICs have at most a few thousand queues,
	// so anything larger is a typo, not a queue.
	maxQueue = 1<<16 - 1
)

// Validate fills the defaults of the fields that have one when empty (an
// interface's queues, backend, xdp_mode and zerocopy; the transport
// tunables) and checks everything, collecting every problem, each naming
// its YAML key. It runs once, after the file and the flags are applied;
// running it again on its result changes nothing.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	c.validateInterfaces(bad)

	if c.Port < 1 || c.Port > 65535 {
		bad("port", "%d is not a valid UDP port", c.Port)
	}
	if c.MTU <= 0 {
		bad("mtu", "%d is not a valid MTU", c.MTU)
	}
	if c.Paths <= 0 {
		bad("paths", "%d: want at least 1", c.Paths)
	}
	if !congestionKnown(c.Congestion) {
		if KnownCongestion != nil {
			bad("congestion", "unknown algorithm %q", c.Congestion)
		} else {
			bad("congestion", "unknown algorithm %q (want one of %s)", c.Congestion, strings.Join(builtinCongestion, ", "))
		}
	}
	for _, d := range []struct {
		key string
		v   int
	}{{"dscp_data", c.DSCPData}, {"dscp_control", c.DSCPControl}} {
		if d.v < 0 || d.v > 63 {
			bad(d.key, "%d is not a DSCP value (0..63)", d.v)
		}
	}

	switch s := c.ControlSocket; {
	case s == "":
		bad("control_socket", "empty")
	case !filepath.IsAbs(s):
		bad("control_socket", "%q is not an absolute path", s)
	case filepath.Clean(s) != s:
		bad("control_socket", "%q is not a clean path (want %q)", s, filepath.Clean(s))
	case len(s) > sunPathMax:
		bad("control_socket", "%q is longer than the %d bytes a Unix socket path may have", s, sunPathMax)
	}
	if c.SocketMode&^0o777 != 0 {
		bad("socket_mode", "%#o has bits beyond 0777", uint32(c.SocketMode))
	} else if c.SocketMode&0o222 == 0 {
		// connect(2) on a Unix socket needs write permission on it.
		bad("socket_mode", "%#o lets no one connect: connecting needs write permission", uint32(c.SocketMode))
	}
	if g := c.SocketGroup; g != "" && (len(g) > groupNameMax || strings.ContainsFunc(g, badNameRune)) {
		bad("socket_group", "%q is not a group name", g)
	}

	if a := c.MetricsAddress; a != "" {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			bad("metrics_address", "%q is not host:port", a)
		} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			bad("metrics_address", "%q: %q is not a TCP port", a, port)
		} else if strings.ContainsFunc(host, unicode.IsSpace) {
			bad("metrics_address", "%q: %q is not a host", a, host)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("log_format", "%q is not one of text, json", c.LogFormat)
	}

	for _, l := range []struct {
		key string
		v   int64
	}{
		{"limits.max_sessions", int64(c.Limits.MaxSessions)},
		{"limits.max_regions_per_session", int64(c.Limits.MaxRegionsPerSession)},
		{"limits.max_region_bytes_per_session", c.Limits.MaxRegionBytesPerSession},
		{"limits.max_qps_per_session", int64(c.Limits.MaxQPsPerSession)},
	} {
		if l.v < 1 {
			bad(l.key, "%d: want at least 1", l.v)
		}
	}

	c.validatePlanes(bad)
	errs = append(errs, c.validateTransport()...)
	return errors.Join(errs...)
}

func congestionKnown(name string) bool {
	if KnownCongestion != nil {
		return KnownCongestion(name)
	}
	return slices.Contains(builtinCongestion, name)
}

// badNameRune reports a rune Linux refuses in an interface name (and
// getent would choke on in a group name).
func badNameRune(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) }

// validatePlanes checks plane_interfaces (docs/spec.md §7.9) and sets
// transport.planes from it.
func (c *Config) validatePlanes(bad func(key, format string, a ...any)) {
	if !c.PlaneInterfaces {
		return
	}
	n := len(c.Interfaces)
	if n < 2 || n > transport.MaxPlanes {
		bad("plane_interfaces", "%d interfaces: a host of planes has 2..%d, one per plane", n, transport.MaxPlanes)
		return
	}
	if p := c.Transport.Planes; p != 1 && p != n {
		bad("transport.planes", "%d, but plane_interfaces makes the %d interfaces the planes", p, n)
	}
	c.Transport.Planes = n
	first := &c.Interfaces[0]
	for i := range c.Interfaces[1:] {
		ifc := &c.Interfaces[i+1]
		key := fmt.Sprintf("interfaces[%d]", i+1)
		if !slices.Equal(ifc.Queues, first.Queues) {
			bad(key+".queues", "%v: with plane_interfaces every plane lists interfaces[0]'s queues %v (engine i owns the i-th queue of every plane)", ifc.Queues, first.Queues)
		}
		if ifc.Backend != first.Backend {
			bad(key+".backend", "%s: with plane_interfaces every plane uses interfaces[0]'s backend %s", ifc.Backend, first.Backend)
		}
	}
}

func (c *Config) validateInterfaces(bad func(key, format string, a ...any)) {
	if len(c.Interfaces) == 0 {
		bad("interfaces", "at least one interface is required")
	}
	names := make(map[string]int, len(c.Interfaces))
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		key := fmt.Sprintf("interfaces[%d]", i)
		d := DefaultInterface(ifc.Name)
		if len(ifc.Queues) == 0 {
			ifc.Queues = d.Queues
		}
		if ifc.Backend == "" {
			ifc.Backend = d.Backend
		}
		if ifc.XDPMode == "" {
			ifc.XDPMode = d.XDPMode
		}
		if ifc.Zerocopy == "" {
			ifc.Zerocopy = d.Zerocopy
		}

		switch n := ifc.Name; {
		case n == "":
			bad(key+".name", "required")
		case len(n) > ifNameMax || n == "." || n == ".." || strings.ContainsFunc(n, badNameRune):
			bad(key+".name", "%q is not a Linux interface name", n)
		default:
			if j, dup := names[n]; dup {
				bad(key+".name", "duplicate interface %s (also interfaces[%d])", n, j)
			}
			names[n] = i
		}

		seen := make(map[int]bool, len(ifc.Queues))
		for _, q := range ifc.Queues {
			switch {
			case q < 0 || q > maxQueue:
				bad(key+".queues", "%d is not a queue number (0..%d)", q, maxQueue)
			case seen[q]:
				bad(key+".queues", "duplicate queue %d", q)
			}
			seen[q] = true
		}

		switch ifc.Backend {
		case BackendAuto, BackendAFXDP, BackendUDP:
		default:
			bad(key+".backend", "%q is not one of afxdp, udp, auto", ifc.Backend)
		}
		switch ifc.XDPMode {
		case XDPAuto, XDPNative, XDPGeneric:
		default:
			bad(key+".xdp_mode", "%q is not one of auto, native, generic", ifc.XDPMode)
		}
		switch ifc.Zerocopy {
		case ZerocopyAuto, ZerocopyOn, ZerocopyOff:
		default:
			bad(key+".zerocopy", "%q is not one of auto, on, off", ifc.Zerocopy)
		}
		if ifc.Backend == BackendUDP {
			if ifc.XDPMode != XDPAuto {
				bad(key+".xdp_mode", "%s applies only to the afxdp backend", ifc.XDPMode)
			}
			if ifc.Zerocopy != ZerocopyAuto {
				bad(key+".zerocopy", "%s applies only to the afxdp backend", ifc.Zerocopy)
			}
		}
		if ifc.XDPMode == XDPGeneric && ifc.Zerocopy == ZerocopyOn {
			bad(key+".zerocopy", "on needs native XDP: generic XDP always copies")
		}

		if a := ifc.Address; a.IsValid() {
			switch {
			case a.Is4In6():
				bad(key+".address", "%s is an IPv4-mapped address; write %s", a, a.Unmap())
			case a.IsUnspecified() || a.IsMulticast():
				bad(key+".address", "%s is not a unicast address", a)
			}
			for j := range i {
				if c.Interfaces[j].Address == a {
					bad(key+".address", "%s is also interfaces[%d]'s", a, j)
				}
			}
		}
	}
}

// Where transport.Validate's messages belong in the file. Its rules and
// words are its own; this only names the key. A message not listed is
// reported under "transport", and a test checks each one is listed.
var transportKeys = []struct{ prefix, key string }{
	{"mtu ", "mtu"},
	{"paths ", "paths"},
	{"recv window ", "transport.recv_window"},
	{"send window ", "transport.send_window"},
	{"pacing burst ", "transport.pacing_burst"},
	{"message window ", "transport.msg_window"},
	{"receive queue ", "transport.recv_queue"},
	{"max streams ", "transport.max_streams"},
	{"max path id ", "transport.max_path_id"},
	{"path ring ", "transport.path_ring"},
	{"ack coalescing ", "transport.ack_every, transport.ack_delay"},
	{"reorder packets ", "transport.reorder_packets"},
	{"reorder fraction ", "transport.reorder_fraction"},
	{"rto bounds ", "transport.initial_rto, transport.min_rto, transport.max_rto"},
	{"retry limits ", "transport.max_retries, transport.rnr_retries, transport.connect_retries"},
	{"entropy range ", "transport.entropy_min, transport.entropy_max"},
	{"keepalive probes ", "transport.keepalive_probes"},
	{"mode ", "transport.mode"},
	{"planes ", "transport.planes"},
	{"path health", "transport.suspect_losses, transport.path_timeout_rtts, transport.min_path_timeout, transport.slow_factor"},
	{"probes", "transport.probe_count, transport.restore_probes"},
	{"probe interval bounds ", "transport.min_probe_interval, transport.max_probe_interval"},
}

func transportKey(msg string) string {
	for _, k := range transportKeys {
		if strings.HasPrefix(msg, k.prefix) {
			return k.key
		}
	}
	return "transport"
}

// validateTransport completes c.Transport from the top-level keys and lets
// the transport fill its defaults and apply its rules, adding only the
// checks the transport leaves out (it reads zero as "default" and does not
// look at these for negative values).
func (c *Config) validateTransport() []error {
	var errs []error
	t := &c.Transport
	for _, d := range []struct {
		key string
		v   int64
	}{
		{"transport.rnr_delay", int64(t.RNRDelay)},
		{"transport.connect_timeout", int64(t.ConnectTimeout)},
		{"transport.keepalive_probes", int64(t.KeepaliveProbes)},
		{"transport.cookie_lifetime", int64(t.CookieLifetime)},
		{"transport.reset_rate", int64(t.ResetRate)},
		{"transport.max_conns", int64(t.MaxConns)},
		{"transport.min_path_timeout", int64(t.MinPathTimeout)},
		{"transport.min_probe_interval", int64(t.MinProbeInterval)},
		{"transport.max_probe_interval", int64(t.MaxProbeInterval)},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: negative (0 means the transport's default)", d.key))
		}
	}
	// Invalid top-level values were reported above; zero lets the transport
	// fall back to its default instead of reporting them twice.
	t.MTU, t.Paths, t.Port = max(c.MTU, 0), max(c.Paths, 0), 0
	if c.Port >= 1 && c.Port <= 65535 {
		t.Port = uint16(c.Port)
	}
	if err := t.Validate(); err != nil {
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("%s: %w", transportKey(e.Error()), e))
		}
	}
	return errs
}
