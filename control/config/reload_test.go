package config

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

func TestReloadable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mut     func(*Config)
		changes []string
		err     string
	}{
		{"nothing", func(*Config) {}, nil, ""},
		{"log level", func(c *Config) { c.LogLevel = "debug" }, []string{"log_level"}, ""},
		{"log and metrics and limits", func(c *Config) {
			c.LogFormat, c.MetricsAddress, c.Limits.MaxSessions, c.Limits.MaxQPsPerSession = "json", "", 1, 2
		}, []string{"metrics_address", "log_format", "limits.max_sessions", "limits.max_qps_per_session"}, ""},
		{"port", func(c *Config) { c.Port = 1 }, nil, "port cannot change without a restart"},
		{"interfaces", func(c *Config) { c.Interfaces[0].Queues = []int{0, 1} }, nil,
			"interfaces cannot change without a restart"},
		{"mixed", func(c *Config) { c.LogLevel, c.MTU, c.ControlSocket = "error", 9000, "/run/x.sock" },
			[]string{"log_level"}, "mtu, control_socket cannot change without a restart"},
		{"transport", func(c *Config) { c.Transport.SendWindow, c.Transport.AckDelay = 1, 1 }, nil,
			"transport.send_window, transport.ack_delay cannot change without a restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := mustParse(t, base)
			next := clone(old)
			tc.mut(next)
			changes, err := Reloadable(old, next)
			if !slices.Equal(changes, tc.changes) {
				t.Errorf("changes %q, want %q", changes, tc.changes)
			}
			if got := errString(err); got != tc.err {
				t.Errorf("err %q, want %q", got, tc.err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestReloadableCoversEveryField changes each field of a Config in turn and
// checks that Reloadable notices: a field added to Config and forgotten in
// reload.go fails here.
func TestReloadableCoversEveryField(t *testing.T) {
	old := mustParse(t, base)
	check := func(path string, mut func(*Config)) {
		next := clone(old)
		mut(next)
		changes, err := Reloadable(old, next)
		if len(changes) == 0 && err == nil {
			t.Errorf("Reloadable does not notice a change of %s", path)
		}
	}
	var visit func(path string, index []int, typ reflect.Type)
	visit = func(path string, index []int, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			p, idx := path+"."+f.Name, append(slices.Clip(index), i)
			switch p {
			case ".Transport.MTU", ".Transport.Paths", ".Transport.Port", ".Transport.Seed", ".Transport.IDMask", ".Transport.IDTag", ".Transport.Congestion":
				continue // set from the top level, or never from the file
			}
			if f.Type.Kind() == reflect.Struct {
				visit(p, idx, f.Type)
				continue
			}
			check(p, func(c *Config) { perturb(reflect.ValueOf(c).Elem().FieldByIndex(idx)) })
		}
	}
	visit("", nil, reflect.TypeFor[Config]())
	// And each field of an interface.
	it := reflect.TypeFor[Interface]()
	for i := range it.NumField() {
		check(".Interfaces[0]."+it.Field(i).Name, func(c *Config) {
			perturb(reflect.ValueOf(&c.Interfaces[0]).Elem().Field(i))
		})
	}
}

// perturb changes v to a different value of its type.
func perturb(v reflect.Value) {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case reflect.Struct: // netip.Addr
		v.Set(reflect.ValueOf(netip.MustParseAddr("192.0.2.1")))
	default:
		panic("perturb: " + v.Kind().String())
	}
}
