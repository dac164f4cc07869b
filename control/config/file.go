package config

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/transport"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// fileConfig is the YAML schema, kept apart from Config so that Config stays
// a plain value. Every scalar is a leaf, which records whether the file set
// it and on which line; sections are plain structs, so the decoder's
// KnownFields check reaches every level and no section hides keys from it.
type fileConfig struct {
	Interfaces     []fileInterface `yaml:"interfaces"`
	PlaneIfaces    leaf[bool]      `yaml:"plane_interfaces"`
	Port           leaf[int]       `yaml:"port"`
	MTU            leaf[int]       `yaml:"mtu"`
	Paths          leaf[int]       `yaml:"paths"`
	Congestion     leaf[string]    `yaml:"congestion"`
	DSCPData       leaf[int]       `yaml:"dscp_data"`
	DSCPControl    leaf[int]       `yaml:"dscp_control"`
	ControlSocket  leaf[string]    `yaml:"control_socket"`
	SocketMode     leaf[string]    `yaml:"socket_mode"`
	SocketGroup    leaf[string]    `yaml:"socket_group"`
	MetricsAddress leaf[string]    `yaml:"metrics_address"`
	LogLevel       leaf[string]    `yaml:"log_level"`
	LogFormat      leaf[string]    `yaml:"log_format"`
	Limits         fileLimits      `yaml:"limits"`
	Transport      fileTransport   `yaml:"transport"`
}

type fileInterface struct {
	Name     leaf[string] `yaml:"name"`
	Queues   leaf[[]int]  `yaml:"queues"`
	Backend  leaf[string] `yaml:"backend"`
	XDPMode  leaf[string] `yaml:"xdp_mode"`
	Zerocopy leaf[string] `yaml:"zerocopy"`
	Address  leaf[string] `yaml:"address"`
}

type fileLimits struct {
	MaxSessions              leaf[int]   `yaml:"max_sessions"`
	MaxRegionsPerSession     leaf[int]   `yaml:"max_regions_per_session"`
	MaxRegionBytesPerSession leaf[int64] `yaml:"max_region_bytes_per_session"`
	MaxQPsPerSession         leaf[int]   `yaml:"max_qps_per_session"`
}

// fileTransport lists the transport tunables an operator may set. Each field
// has the name and type of its transport.Config counterpart (Reloadable and
// a test rely on that); MTU, Paths and Port are top-level keys and Seed is
// for the simulator, so they are not here.
type fileTransport struct {
	SendWindow      leaf[int]           `yaml:"send_window"`
	RecvWindow      leaf[int]           `yaml:"recv_window"`
	MsgWindow       leaf[int]           `yaml:"msg_window"`
	RecvQueue       leaf[int]           `yaml:"recv_queue"`
	MaxStreams      leaf[int]           `yaml:"max_streams"`
	MaxPathID       leaf[int]           `yaml:"max_path_id"`
	PathRing        leaf[int]           `yaml:"path_ring"`
	AckEvery        leaf[int]           `yaml:"ack_every"`
	AckDelay        leaf[time.Duration] `yaml:"ack_delay"`
	ReorderPackets  leaf[int]           `yaml:"reorder_packets"`
	ReorderFraction leaf[float64]       `yaml:"reorder_fraction"`
	InitialRTO      leaf[time.Duration] `yaml:"initial_rto"`
	MinRTO          leaf[time.Duration] `yaml:"min_rto"`
	MaxRTO          leaf[time.Duration] `yaml:"max_rto"`
	MaxRetries      leaf[int]           `yaml:"max_retries"`
	RNRDelay        leaf[time.Duration] `yaml:"rnr_delay"`
	RNRRetries      leaf[int]           `yaml:"rnr_retries"`
	ConnectTimeout  leaf[time.Duration] `yaml:"connect_timeout"`
	ConnectRetries  leaf[int]           `yaml:"connect_retries"`
	// Keepalive of idle connections (docs/spec.md §4.4): silence before a
	// PROBE and between probes (negative: off), and how many unanswered
	// fail the connection.
	KeepaliveInterval leaf[time.Duration] `yaml:"keepalive_interval"`
	KeepaliveProbes   leaf[int]           `yaml:"keepalive_probes"`
	CookieLifetime    leaf[time.Duration] `yaml:"cookie_lifetime"`
	ResetRate         leaf[int]           `yaml:"reset_rate"`
	MaxConns          leaf[int]           `yaml:"max_conns"`
	EntropyMin        leaf[uint16]        `yaml:"entropy_min"`
	EntropyMax        leaf[uint16]        `yaml:"entropy_max"`
	// Paths (docs/spec.md §8.7, §8.8).
	Mode             leaf[transport.Mode] `yaml:"mode"`
	Planes           leaf[int]            `yaml:"planes"`
	SuspectLosses    leaf[int]            `yaml:"suspect_losses"`
	PathTimeoutRTTs  leaf[float64]        `yaml:"path_timeout_rtts"`
	MinPathTimeout   leaf[time.Duration]  `yaml:"min_path_timeout"`
	SlowFactor       leaf[float64]        `yaml:"slow_factor"`
	ProbeCount       leaf[int]            `yaml:"probe_count"`
	RestoreProbes    leaf[int]            `yaml:"restore_probes"`
	MinProbeInterval leaf[time.Duration]  `yaml:"min_probe_interval"`
	MaxProbeInterval leaf[time.Duration]  `yaml:"max_probe_interval"`
	// Congestion controller seeds (the algorithm is the top-level key).
	LineRateBps   leaf[uint64]        `yaml:"line_rate_bps"`
	BaseRTT       leaf[time.Duration] `yaml:"base_rtt"`
	InitialWindow leaf[int]           `yaml:"initial_window"`
	TargetQueue   leaf[time.Duration] `yaml:"target_queue"`
	PacingBurst   leaf[time.Duration] `yaml:"pacing_burst"`
	RateHint      leaf[string]        `yaml:"rate_hint"`
}

// leaf is one scalar (or list of scalars) of the file. A key with no value
// (YAML null) leaves it unset, which keeps the default.
type leaf[T any] struct {
	v    T
	line int
	set  bool
}

// UnmarshalYAML decodes the value with yaml's own rules (durations must be
// strings with a unit, "10us"; an integer into an int, and so on), then
// refuses what those rules would silently truncate: a float where an integer
// belongs.
func (l *leaf[T]) UnmarshalYAML(n *yaml.Node) error {
	if err := n.Decode(&l.v); err != nil {
		if _, ok := any(l.v).(time.Duration); ok && n.Kind == yaml.ScalarNode {
			return &yaml.TypeError{Errors: []string{
				fmt.Sprintf("line %d: %q is not a duration: want a number with a unit, as in 10us, 1ms, 10s", n.Line, n.Value)}}
		}
		return err
	}
	switch any(l.v).(type) {
	case int, int64, uint16, []int:
		if f := floatIn(n); f != nil {
			return &yaml.TypeError{Errors: []string{
				fmt.Sprintf("line %d: %s is not an integer", f.Line, f.Value)}}
		}
	}
	l.line, l.set = n.Line, true
	return nil
}

// floatIn returns the first float scalar in n (a scalar or a sequence).
func floatIn(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!float" {
			return n
		}
	case yaml.SequenceNode:
		for _, e := range n.Content {
			if f := floatIn(e); f != nil {
				return f
			}
		}
	}
	return nil
}

// set copies a leaf the file set into dst.
func set[T any](dst *T, l leaf[T]) {
	if l.set {
		*dst = l.v
	}
}

// maxFileSize bounds what Load reads: a configuration is a few KB, so a
// larger file is a mistake (or a device), not a configuration.
const maxFileSize = 1 << 20

// Load reads the configuration file at path over Defaults and validates it.
func Load(path string) (*Config, error) { return load(path, nil) }

// Parse decodes data (named source in errors) over Defaults and validates
// it. Empty data, or only comments, yields the defaults, which do not
// validate without an interface.
func Parse(data []byte, source string) (*Config, error) { return parse(data, source, nil) }

func load(path string, flags *Flags) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load configuration: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("load configuration: %s is larger than %d bytes", path, maxFileSize)
	}
	return parse(data, path, flags)
}

// parse layers defaults, the file and the flags, then validates once.
func parse(data []byte, source string, flags *Flags) (*Config, error) {
	c := Defaults()
	if err := decode(data, source, &c); err != nil {
		return nil, err
	}
	flags.apply(&c)
	if err := c.Validate(); err != nil {
		return nil, within(source, err)
	}
	return &c, nil
}

// decode applies the one YAML document in data to c.
func decode(data []byte, source string, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f fileConfig
	switch err := dec.Decode(&f); {
	case errors.Is(err, io.EOF):
		return nil // nothing but comments: every default stands
	case err != nil:
		return decodeError(source, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return decodeError(source, err)
	default:
		return fmt.Errorf("%s:%d: a second YAML document; the configuration is one document", source, next.Line)
	}
	return f.apply(c, source)
}

// apply copies what the file set into c, parsing the scalars whose YAML type
// is a string but whose Go type is not; Validate checks the rest.
func (f *fileConfig) apply(c *Config, source string) error {
	var errs []error
	bad := func(line int, key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s: %s", source, line, key, fmt.Sprintf(format, a...)))
	}
	if f.Interfaces != nil {
		c.Interfaces = make([]Interface, len(f.Interfaces))
		for i, fi := range f.Interfaces {
			key := fmt.Sprintf("interfaces[%d]", i)
			ifc := DefaultInterface(fi.Name.v)
			set(&ifc.Queues, fi.Queues)
			if fi.Queues.set && len(fi.Queues.v) == 0 {
				bad(fi.Queues.line, key+".queues", "empty list; leave the key out for the default [0]")
			}
			ifc.Backend = Backend(fi.Backend.v)
			ifc.XDPMode = XDPMode(fi.XDPMode.v)
			ifc.Zerocopy = Zerocopy(fi.Zerocopy.v)
			if fi.Address.set && fi.Address.v != "" {
				a, err := netip.ParseAddr(fi.Address.v)
				if err != nil {
					bad(fi.Address.line, key+".address", "%q is not an IP address", fi.Address.v)
				}
				ifc.Address = a
			}
			c.Interfaces[i] = ifc
		}
	}
	set(&c.PlaneInterfaces, f.PlaneIfaces)
	set(&c.Port, f.Port)
	set(&c.MTU, f.MTU)
	set(&c.Paths, f.Paths)
	set(&c.Congestion, f.Congestion)
	set(&c.DSCPData, f.DSCPData)
	set(&c.DSCPControl, f.DSCPControl)
	set(&c.ControlSocket, f.ControlSocket)
	if f.SocketMode.set {
		m, err := parseMode(f.SocketMode.v)
		if err != nil {
			bad(f.SocketMode.line, "socket_mode", "%v", err)
		}
		c.SocketMode = m
	}
	set(&c.SocketGroup, f.SocketGroup)
	set(&c.MetricsAddress, f.MetricsAddress)
	set(&c.LogLevel, f.LogLevel)
	set(&c.LogFormat, f.LogFormat)

	l, fl := &c.Limits, &f.Limits
	set(&l.MaxSessions, fl.MaxSessions)
	set(&l.MaxRegionsPerSession, fl.MaxRegionsPerSession)
	set(&l.MaxRegionBytesPerSession, fl.MaxRegionBytesPerSession)
	set(&l.MaxQPsPerSession, fl.MaxQPsPerSession)

	t, ft := &c.Transport, &f.Transport
	set(&t.SendWindow, ft.SendWindow)
	set(&t.RecvWindow, ft.RecvWindow)
	set(&t.MsgWindow, ft.MsgWindow)
	set(&t.RecvQueue, ft.RecvQueue)
	set(&t.MaxStreams, ft.MaxStreams)
	set(&t.MaxPathID, ft.MaxPathID)
	set(&t.PathRing, ft.PathRing)
	set(&t.AckEvery, ft.AckEvery)
	set(&t.AckDelay, ft.AckDelay)
	set(&t.ReorderPackets, ft.ReorderPackets)
	set(&t.ReorderFraction, ft.ReorderFraction)
	set(&t.InitialRTO, ft.InitialRTO)
	set(&t.MinRTO, ft.MinRTO)
	set(&t.MaxRTO, ft.MaxRTO)
	set(&t.MaxRetries, ft.MaxRetries)
	set(&t.RNRDelay, ft.RNRDelay)
	set(&t.RNRRetries, ft.RNRRetries)
	set(&t.ConnectTimeout, ft.ConnectTimeout)
	set(&t.ConnectRetries, ft.ConnectRetries)
	set(&t.KeepaliveInterval, ft.KeepaliveInterval)
	set(&t.KeepaliveProbes, ft.KeepaliveProbes)
	set(&t.CookieLifetime, ft.CookieLifetime)
	set(&t.ResetRate, ft.ResetRate)
	set(&t.MaxConns, ft.MaxConns)
	set(&t.EntropyMin, ft.EntropyMin)
	set(&t.EntropyMax, ft.EntropyMax)
	set(&t.Mode, ft.Mode)
	set(&t.Planes, ft.Planes)
	set(&t.SuspectLosses, ft.SuspectLosses)
	set(&t.PathTimeoutRTTs, ft.PathTimeoutRTTs)
	set(&t.MinPathTimeout, ft.MinPathTimeout)
	set(&t.SlowFactor, ft.SlowFactor)
	set(&t.ProbeCount, ft.ProbeCount)
	set(&t.RestoreProbes, ft.RestoreProbes)
	set(&t.MinProbeInterval, ft.MinProbeInterval)
	set(&t.MaxProbeInterval, ft.MaxProbeInterval)
	set(&t.LineRateBps, ft.LineRateBps)
	set(&t.BaseRTT, ft.BaseRTT)
	set(&t.InitialWindow, ft.InitialWindow)
	set(&t.TargetQueue, ft.TargetQueue)
	set(&t.PacingBurst, ft.PacingBurst)
	set(&t.RateHint, ft.RateHint)
	return errors.Join(errs...)
}

// parseMode reads a file mode the way chmod does: octal digits, with or
// without a leading 0 or 0o, whether or not the YAML quoted them (an
// unquoted 0660 would otherwise be read as decimal 660 or octal 432
// depending on the YAML version).
func parseMode(s string) (fs.FileMode, error) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	if digits == "" {
		return 0, fmt.Errorf("%q is not an octal file mode", s)
	}
	v, err := strconv.ParseUint(digits, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not an octal file mode", s)
	}
	if v > 0o777 {
		return 0, fmt.Errorf("%s has bits beyond 0777 (no setuid, setgid or sticky bits on a socket)", s)
	}
	return fs.FileMode(v), nil
}

// What yaml says about the schema's own types, and the words for them here.
var (
	reLine    = regexp.MustCompile(`^line (\d+): (.*)$`)
	reUnknown = regexp.MustCompile(`^field (.+) not found in type (\S+)$`)
	reDup     = regexp.MustCompile(`^field (.+) already set in type (\S+)$`)
	sections  = map[string]string{
		"config.fileConfig":    "",
		"config.fileInterface": " in an interface",
		"config.fileLimits":    " in limits",
		"config.fileTransport": " in transport",
	}
	typeWords = strings.NewReplacer(
		"[]config.fileInterface", "a list of interfaces",
		"config.fileConfig", "a mapping of settings",
		"config.fileInterface", "an interface mapping",
		"config.fileLimits", "the limits mapping",
		"config.fileTransport", "the transport mapping",
	)
)

// decodeError turns yaml's errors into one per problem, each as
// "source:line: message" in this package's words.
func decodeError(source string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return located(source, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	errs := make([]error, len(te.Errors))
	for i, msg := range te.Errors {
		errs[i] = located(source, msg)
	}
	return errors.Join(errs...)
}

func located(source, msg string) error {
	where := source
	if m := reLine.FindStringSubmatch(msg); m != nil {
		where, msg = source+":"+m[1], m[2]
	}
	if m := reUnknown.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("unknown key %q%s", m[1], sections[m[2]])
	} else if m := reDup.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("key %q given twice%s", m[1], sections[m[2]])
	} else {
		msg = typeWords.Replace(msg)
	}
	return fmt.Errorf("%s: %s", where, msg)
}

// within prefixes each of Validate's errors with the source they came from.
func within(source string, err error) error {
	errs := unjoin(err)
	for i, e := range errs {
		errs[i] = fmt.Errorf("%s: %w", source, e)
	}
	return errors.Join(errs...)
}

// unjoin returns the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return append([]error(nil), j.Unwrap()...)
	}
	return []error{err}
}
