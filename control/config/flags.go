package config

import (
	"errors"
	"flag"
	"strings"
)

// Flags are the command-line overrides of the file. Bind them, parse the
// flag set, then load through them: defaults < file < flags, validated once
// after both, so a flag can fix what the file got wrong. Only flags given on
// the command line override anything. Keep the Flags for the daemon's life:
// a reload that loads through them keeps the command line's word.
type Flags struct {
	fs             *flag.FlagSet
	interfaces     nameList
	port           int
	mtu            int
	paths          int
	congestion     string
	controlSocket  string
	metricsAddress string
	logLevel       string
}

// BindFlags defines the override flags on fs: -interface (repeated or
// comma-separated), -port, -mtu, -paths, -cc, -socket,
// -metrics-address and -log-level. The defaults they show are Defaults'.
func BindFlags(fs *flag.FlagSet) *Flags {
	d := Defaults()
	f := &Flags{fs: fs}
	fs.Var(&f.interfaces, "interface", "`name` of an interface to serve, repeated or comma-separated; replaces the file's list (an interface the file also describes keeps its settings there)")
	fs.IntVar(&f.port, "port", d.Port, "UDP `port` of the transport")
	fs.IntVar(&f.mtu, "mtu", d.MTU, "IP `MTU` of the links")
	fs.IntVar(&f.paths, "paths", d.Paths, "logical paths per connection")
	fs.StringVar(&f.congestion, "cc", d.Congestion, "congestion control `algorithm` (the file's congestion key)")
	fs.StringVar(&f.controlSocket, "socket", d.ControlSocket, "`path` of the control socket (the file's control_socket key)")
	fs.StringVar(&f.metricsAddress, "metrics-address", d.MetricsAddress, "`host:port` of the metrics endpoint; empty disables it")
	fs.StringVar(&f.logLevel, "log-level", d.LogLevel, "log `level`: debug, info, warn or error")
	return f
}

// Load reads the file at path (none if path is empty: defaults and flags
// only), applies the flags given on the command line and validates.
func (f *Flags) Load(path string) (*Config, error) {
	if path == "" {
		return parse(nil, "command line", f)
	}
	return load(path, f)
}

// Parse is Load for a file already read; source names it in errors.
func (f *Flags) Parse(data []byte, source string) (*Config, error) {
	return parse(data, source, f)
}

// Apply writes the flags given on the command line into c, without
// validating; Load and Parse call it between the file and Validate.
func (f *Flags) Apply(c *Config) { f.apply(c) }

func (f *Flags) apply(c *Config) {
	if f == nil {
		return
	}
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "interface":
			c.Interfaces = f.interfaces.pick(c.Interfaces)
		case "port":
			c.Port = f.port
		case "mtu":
			c.MTU = f.mtu
		case "paths":
			c.Paths = f.paths
		case "cc":
			c.Congestion = f.congestion
		case "socket":
			c.ControlSocket = f.controlSocket
		case "metrics-address":
			c.MetricsAddress = f.metricsAddress
		case "log-level":
			c.LogLevel = f.logLevel
		}
	})
}

// nameList is the value of -interface.
type nameList []string

func (l *nameList) String() string { return strings.Join(*l, ",") }

func (l *nameList) Set(s string) error {
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return errors.New("empty interface name")
		}
		*l = append(*l, n)
	}
	return nil
}

// pick returns the named interfaces in flag order, each with its settings
// from have if have names it too, else with the defaults.
func (l nameList) pick(have []Interface) []Interface {
	out := make([]Interface, 0, len(l))
next:
	for _, n := range l {
		for _, ifc := range have {
			if ifc.Name == n {
				ifc.Queues = append([]int(nil), ifc.Queues...)
				out = append(out, ifc)
				continue next
			}
		}
		out = append(out, DefaultInterface(n))
	}
	return out
}
