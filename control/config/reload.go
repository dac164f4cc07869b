package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/metaroce/metaroce/transport"
)

// What a reload (SIGHUP) may change. A key is reloadable when the daemon can
// apply it without touching a live socket, engine or connection:
//
//	log_level, log_format     the logger's level and handler are swapped
//	metrics_address           the metrics listener is reopened ("" closes it)
//	limits.*                  checked on each request from then on; what a
//	                          session already holds is not taken back
//
// Every other key needs a restart, because live objects were built from it:
//
//	interfaces, port, mtu, paths, congestion, dscp_data, dscp_control:
//	    the AF_XDP sockets, XDP programs, engines and every connection
//	control_socket, socket_mode, socket_group: the listening socket
//	transport.*: the state of every connection
var fields = []struct {
	key    string
	reload bool
	same   func(a, b *Config) bool
}{
	{"interfaces", false, func(a, b *Config) bool { return slices.EqualFunc(a.Interfaces, b.Interfaces, sameInterface) }},
	{"plane_interfaces", false, func(a, b *Config) bool { return a.PlaneInterfaces == b.PlaneInterfaces }},
	{"port", false, func(a, b *Config) bool { return a.Port == b.Port }},
	{"mtu", false, func(a, b *Config) bool { return a.MTU == b.MTU }},
	{"paths", false, func(a, b *Config) bool { return a.Paths == b.Paths }},
	{"congestion", false, func(a, b *Config) bool { return a.Congestion == b.Congestion }},
	{"dscp_data", false, func(a, b *Config) bool { return a.DSCPData == b.DSCPData }},
	{"dscp_control", false, func(a, b *Config) bool { return a.DSCPControl == b.DSCPControl }},
	{"control_socket", false, func(a, b *Config) bool { return a.ControlSocket == b.ControlSocket }},
	{"socket_mode", false, func(a, b *Config) bool { return a.SocketMode == b.SocketMode }},
	{"socket_group", false, func(a, b *Config) bool { return a.SocketGroup == b.SocketGroup }},
	{"metrics_address", true, func(a, b *Config) bool { return a.MetricsAddress == b.MetricsAddress }},
	{"log_level", true, func(a, b *Config) bool { return a.LogLevel == b.LogLevel }},
	{"log_format", true, func(a, b *Config) bool { return a.LogFormat == b.LogFormat }},
	{"limits.max_sessions", true, func(a, b *Config) bool { return a.Limits.MaxSessions == b.Limits.MaxSessions }},
	{"limits.max_regions_per_session", true, func(a, b *Config) bool {
		return a.Limits.MaxRegionsPerSession == b.Limits.MaxRegionsPerSession
	}},
	{"limits.max_region_bytes_per_session", true, func(a, b *Config) bool {
		return a.Limits.MaxRegionBytesPerSession == b.Limits.MaxRegionBytesPerSession
	}},
	{"limits.max_qps_per_session", true, func(a, b *Config) bool { return a.Limits.MaxQPsPerSession == b.Limits.MaxQPsPerSession }},
}

func sameInterface(a, b Interface) bool {
	return a.Name == b.Name && slices.Equal(a.Queues, b.Queues) && a.Backend == b.Backend &&
		a.XDPMode == b.XDPMode && a.Zerocopy == b.Zerocopy && a.Address == b.Address
}

// tunables pairs each transport key with its transport.Config field, found
// by the name fileTransport shares with it.
var tunables = func() []tunable {
	ft, tt := reflect.TypeFor[fileTransport](), reflect.TypeFor[transport.Config]()
	out := make([]tunable, ft.NumField())
	for i := range ft.NumField() {
		f := ft.Field(i)
		tf, ok := tt.FieldByName(f.Name)
		if !ok {
			panic("config: fileTransport." + f.Name + " is not a transport.Config field")
		}
		out[i] = tunable{"transport." + f.Tag.Get("yaml"), tf.Index}
	}
	return out
}()

type tunable struct {
	key   string
	index []int
}

// Reloadable compares the running configuration with a newly loaded one
// (both validated). changes lists the keys that differ and may change at run
// time, for the daemon to apply and log; err, if not nil, names the keys
// that differ and cannot. A daemon should then keep running on old, whole:
// applying half a file is worse than applying none of it.
func Reloadable(old, next *Config) (changes []string, err error) {
	var fixed []string
	note := func(key string, reload bool) {
		if reload {
			changes = append(changes, key)
		} else {
			fixed = append(fixed, key)
		}
	}
	for _, f := range fields {
		if !f.same(old, next) {
			note(f.key, f.reload)
		}
	}
	ot, nt := reflect.ValueOf(old.Transport), reflect.ValueOf(next.Transport)
	for _, t := range tunables {
		if !ot.FieldByIndex(t.index).Equal(nt.FieldByIndex(t.index)) {
			note(t.key, false)
		}
	}
	if len(fixed) > 0 {
		err = fmt.Errorf("%s cannot change without a restart", strings.Join(fixed, ", "))
	}
	return changes, err
}
