package config

import (
	"io/fs"
	"log/slog"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// Config is the daemon's configuration: after Validate, a plain value that
// the daemon builds its runtime objects from and never re-checks. The YAML
// key of each field is given beside it; see deploy/metaroced.yaml for the
// file form.
type Config struct {
	// Interfaces are the links the daemon serves (interfaces). At least one.
	Interfaces []Interface
	// PlaneInterfaces serves the interfaces as the planes of one endpoint
	// (plane_interfaces; docs/spec.md §7.9): interfaces[p] is the host's
	// port on plane p, interfaces[0]'s address is the endpoint's, and each
	// connection sprays its paths over the planes both ends have. The
	// interfaces must list the same queues (engine q owns queue q of every
	// plane) and the same backend; 2 to 8 of them. Validate sets
	// Transport.Planes to their number. Off: each interface is its own
	// endpoint, as before.
	PlaneInterfaces bool

	// Port is the UDP destination port (port).
	Port int
	// MTU is the IP MTU of the links (mtu), 576 to 9216. The transport
	// derives its payload size from it and the links their buffers (above
	// 3500 the AF_XDP backend runs multi-buffer frames). It must not exceed
	// the interfaces' own MTU, which only the daemon can read: it refuses to
	// start if it does, naming the interface and both MTUs.
	MTU int
	// Paths is the number of logical paths per connection (paths).
	Paths int
	// Congestion names the congestion control algorithm (congestion); see
	// KnownCongestion.
	Congestion string
	// DSCPData marks data packets, DSCPControl acks, nacks and connection
	// packets (dscp_data, dscp_control), so a fabric can queue control
	// traffic ahead of the data it regulates. 0..63.
	DSCPData, DSCPControl int

	// ControlSocket is the path of the Unix socket applications attach
	// through (control_socket).
	ControlSocket string
	// SocketMode is the control socket's file mode (socket_mode, written in
	// octal as for chmod). Whoever can connect can register memory and open
	// queue pairs, subject to Limits.
	SocketMode fs.FileMode
	// SocketGroup, if set, is the group (name or numeric id) the control
	// socket is given (socket_group); resolved by the daemon at start.
	SocketGroup string

	// MetricsAddress is the host:port of the Prometheus endpoint
	// (metrics_address); empty disables it.
	MetricsAddress string
	// LogLevel is debug, info, warn or error (log_level).
	LogLevel string
	// LogFormat is text or json (log_format).
	LogFormat string

	// Limits bound what one application may claim (limits).
	Limits Limits

	// Transport holds the transport tunables (transport). Validate sets its
	// MTU, Paths and Port from the fields above, fills its defaults and
	// applies the transport's own rules, so after Validate it is exactly
	// what TransportConfig returns. Its Seed is never read from the file.
	Transport transport.Config
}

// Interface is one link the daemon serves (an element of interfaces).
// Validate fills the fields left empty with DefaultInterface's values.
type Interface struct {
	// Name is the kernel's interface name (name). Required.
	Name string
	// Queues are the NIC queues to serve (queues); one AF_XDP socket and
	// engine each. Default [0].
	Queues []int
	// Backend chooses how packets move (backend). Default auto.
	Backend Backend
	// XDPMode chooses how the XDP program attaches (xdp_mode); only for the
	// afxdp backend. Default auto.
	XDPMode XDPMode
	// Zerocopy chooses the AF_XDP bind mode (zerocopy); only for the afxdp
	// backend. Default auto.
	Zerocopy Zerocopy
	// Address selects which of the interface's addresses to use (address).
	// The zero Addr means the first global unicast address the interface
	// has when the daemon starts; that is resolved at run time, not here.
	Address netip.Addr
}

// Backend chooses how an interface's packets move.
type Backend string

// Backends.
const (
	// BackendAuto uses AF_XDP when the daemon is permitted to (capabilities,
	// kernel, driver) and UDP sockets otherwise.
	BackendAuto Backend = "auto"
	// BackendAFXDP uses AF_XDP or fails.
	BackendAFXDP Backend = "afxdp"
	// BackendUDP uses ordinary UDP sockets: slower, needs no privilege.
	BackendUDP Backend = "udp"
)

// XDPMode chooses how the XDP steering program attaches.
type XDPMode string

// XDP attach modes.
const (
	// XDPAuto tries native (driver) mode and falls back to generic.
	XDPAuto XDPMode = "auto"
	// XDPNative attaches in the driver or fails.
	XDPNative XDPMode = "native"
	// XDPGeneric attaches in the kernel's generic (skb) path: works on any
	// device, always copies.
	XDPGeneric XDPMode = "generic"
)

// Zerocopy chooses the AF_XDP bind mode.
type Zerocopy string

// Zero-copy settings.
const (
	// ZerocopyAuto asks for zero-copy and falls back to copy mode.
	ZerocopyAuto Zerocopy = "auto"
	// ZerocopyOn binds in zero-copy mode or fails.
	ZerocopyOn Zerocopy = "on"
	// ZerocopyOff binds in copy mode.
	ZerocopyOff Zerocopy = "off"
)

// Limits bound what one application session (one control-socket client)
// may claim, so that one buggy or hostile client cannot exhaust the host.
// They apply when a resource is requested: lowering one at run time does
// not take away what a session already holds.
type Limits struct {
	// MaxSessions bounds attached applications (max_sessions).
	MaxSessions int
	// MaxRegionsPerSession bounds registered memory regions per session
	// (max_regions_per_session).
	MaxRegionsPerSession int
	// MaxRegionBytesPerSession bounds the bytes of memory a session may
	// register, summed over its regions (max_region_bytes_per_session).
	MaxRegionBytesPerSession int64
	// MaxQPsPerSession bounds queue pairs per session (max_qps_per_session).
	// The endpoint-wide transport.max_conns still applies on top.
	MaxQPsPerSession int
}

// DefaultPath is where the daemon looks for its configuration file when not
// told otherwise.
const DefaultPath = "/etc/metaroced/metaroced.yaml"

// Defaults returns the configuration before a file or flags are applied.
// Every default lives here (the transport's in transport.Defaults, the
// interface's in DefaultInterface); each has its reason. It has no
// interfaces, so it does not validate as it is.
func Defaults() Config {
	return Config{
		Port:  wire.DefaultPort,
		MTU:   transport.Defaults.MTU,
		Paths: transport.Defaults.Paths,
		// metaroce, as in the simulator, with a software host's target
		// queue and pacing burst (Transport below, docs/spec.md §8.9.4).
		Congestion:     "metaroce",
		DSCPData:       26, // AF31: where RoCE fabrics conventionally queue RDMA data (ECN, PFC)
		DSCPControl:    48, // CS6: where RoCE fabrics put CNPs, ahead of the data they pace
		ControlSocket:  "/run/metaroced/control.sock",
		SocketMode:     0o660,            // owner and group: put applications in socket_group
		MetricsAddress: "127.0.0.1:9473", // loopback: counters are not for the world; 94xx is where exporters live
		LogLevel:       "info",
		LogFormat:      "text",
		Limits: Limits{
			// A host runs tens of ranks, each one session; 256 leaves
			// headroom while bounding the daemon's per-session state.
			MaxSessions: 256,
			// A rank registers a few buffers per peer and per collective;
			// 4096 covers a 1024-peer job with room, and bounds the key table.
			MaxRegionsPerSession: 4096,
			// Registered memory is shared with and mapped by the daemon:
			// 4 GiB covers a rank's communication buffers, and stops one
			// runaway client from pinning the host's memory.
			MaxRegionBytesPerSession: 4 << 30,
			// One queue pair per peer of a 1024-rank job.
			MaxQPsPerSession: 1024,
		},
		Transport: hostTransport(),
	}
}

// hostTransport is transport.Defaults with the two constants a software
// dataplane needs other values of (docs/spec.md §8.9.4, §8.9.5):
//   - TargetQueue 200us, not 5us: the fabric samples of a software link
//     carry its transmit batching (a batch of packets handed to the kernel
//     in one system call leaves over tens of microseconds) on both legs, and
//     a slow port's queue must cover the hosts' scheduling gaps. Measured on
//     the demo's star at no loss: 25 us 1.1 Gb/s, 50 us 2.1, 100-400 us
//     3.0-3.4 (the send window alone: 3.3); the incast's p99 74-79 ms at
//     100 us, 56-73 ms at 200 us, no better at 300 or 400.
//   - PacingBurst 200us: paced a packet at a time the engine hands the
//     kernel a packet per system call, and the star moved 1.1 Gb/s; with
//     bursts 2.2-4.1 Gb/s, the same ratio to raw AF_XDP as the send window
//     alone. At the incast port's 50 Mb/s per sender it is under a packet.
func hostTransport() transport.Config {
	t := transport.Defaults
	t.TargetQueue = 200 * time.Microsecond
	t.PacingBurst = 200 * time.Microsecond
	return t
}

// DefaultInterface returns the interface called name with every other field
// at its default.
func DefaultInterface(name string) Interface {
	return Interface{
		Name:     name,
		Queues:   []int{0}, // every NIC has queue 0; RSS spreads flows to it too
		Backend:  BackendAuto,
		XDPMode:  XDPAuto,
		Zerocopy: ZerocopyAuto,
	}
}

// TransportConfig returns the transport configuration: c.Transport with
// the top-level mtu, paths and port applied. After Validate (or Parse, or
// Load) has succeeded that is exactly c.Transport, every default resolved;
// on a Config that was never validated it is still consistent with the
// top-level fields, but unchecked.
func (c *Config) TransportConfig() transport.Config {
	t := c.Transport
	t.MTU, t.Paths = c.MTU, c.Paths
	if c.Port >= 1 && c.Port <= 65535 {
		t.Port = uint16(c.Port)
	}
	return t
}

// SlogLevel returns LogLevel as a slog.Level (info for anything Validate
// would reject).
func (c *Config) SlogLevel() slog.Level {
	switch c.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
