package config

import (
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

const examplePath = "../../deploy/metaroced.yaml"

func TestDefaults(t *testing.T) {
	c := mustParse(t, base)
	want := valid()
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, &want) {
		t.Fatalf("Parse(base) = %+v\nwant %+v", c, want)
	}
	ifc := c.Interfaces[0]
	if !slices.Equal(ifc.Queues, []int{0}) || ifc.Backend != BackendAuto || ifc.XDPMode != XDPAuto ||
		ifc.Zerocopy != ZerocopyAuto || ifc.Address.IsValid() {
		t.Errorf("interface defaults: %+v", ifc)
	}
	if c.Port != wire.DefaultPort || c.MTU != transport.Defaults.MTU || c.Paths != transport.Defaults.Paths {
		t.Errorf("port %d mtu %d paths %d", c.Port, c.MTU, c.Paths)
	}
	if c.Congestion != "metaroce" || c.DSCPData != 26 || c.DSCPControl != 48 {
		t.Errorf("congestion %q dscp %d/%d", c.Congestion, c.DSCPData, c.DSCPControl)
	}
	if c.ControlSocket != "/run/metaroced/control.sock" || c.SocketMode != 0o660 || c.SocketGroup != "" {
		t.Errorf("socket %q %o %q", c.ControlSocket, c.SocketMode, c.SocketGroup)
	}
	if c.MetricsAddress != "127.0.0.1:9473" || c.LogLevel != "info" || c.LogFormat != "text" {
		t.Errorf("metrics %q log %q %q", c.MetricsAddress, c.LogLevel, c.LogFormat)
	}
	if l := c.Limits; l.MaxSessions < 1 || l.MaxRegionsPerSession < 1 || l.MaxRegionBytesPerSession < 1 || l.MaxQPsPerSession < 1 {
		t.Errorf("limits %+v", l)
	}
	// The transport's defaults are its own but for a software host's
	// target queue and pacing burst (docs/spec.md §8.9.4).
	wt := transport.Defaults
	wt.TargetQueue, wt.PacingBurst = 200*time.Microsecond, 200*time.Microsecond
	if got := c.TransportConfig(); got != wt {
		t.Errorf("TransportConfig() = %+v\nwant %+v", got, wt)
	}
	d := Defaults()
	if err := d.Validate(); err == nil || err.Error() != "interfaces: at least one interface is required" {
		t.Errorf("Defaults without an interface: %v", err)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	for _, data := range []string{"", "# nothing\n", "\n\n", "---\n", "~\n"} {
		_, err := Parse([]byte(data), "test.yaml")
		if err == nil || err.Error() != "test.yaml: interfaces: at least one interface is required" {
			t.Errorf("Parse(%q): %v", data, err)
		}
	}
}

// TestExampleIsDefaults keeps deploy/metaroced.yaml honest: it parses, and
// every value in it is the default.
func TestExampleIsDefaults(t *testing.T) {
	c, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	want := valid()
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, &want) {
		t.Fatalf("%s differs from the defaults:\n got %+v\nwant %+v", examplePath, c, want)
	}
}

// TestExampleListsEveryKey: every key of the schema appears in the example,
// so an operator finds each one documented there.
func TestExampleListsEveryKey(t *testing.T) {
	data := readExample(t)
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	var walk func(path string, n *yaml.Node)
	walk = func(path string, n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			walk(path, n.Content[0])
		case yaml.SequenceNode:
			for _, e := range n.Content {
				walk(path+"[]", e)
			}
		case yaml.MappingNode:
			for i := 0; i < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if path != "" {
					k = path + "." + k
				}
				have[k] = true
				walk(k, n.Content[i+1])
			}
		}
	}
	walk("", &doc)
	for _, k := range schemaKeys("", reflect.TypeFor[fileConfig]()) {
		if !have[k] {
			t.Errorf("%s does not list %s", examplePath, k)
		}
	}
}

// schemaKeys lists the key paths of a file struct type.
func schemaKeys(prefix string, t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		k := prefix + f.Tag.Get("yaml")
		keys = append(keys, k)
		switch ft := f.Type; {
		case ft.Kind() == reflect.Struct && !strings.HasPrefix(ft.Name(), "leaf["):
			keys = append(keys, schemaKeys(k+".", ft)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, schemaKeys(k+"[].", ft.Elem())...)
		}
	}
	return keys
}

func TestSchemaKeysCoverTransport(t *testing.T) {
	// Every transport.Config field but those set elsewhere has a key.
	keys := map[string]bool{}
	for _, tu := range tunables {
		keys[tu.key] = true
	}
	tt := reflect.TypeFor[transport.Config]()
	ft := reflect.TypeFor[fileTransport]()
	for i := range tt.NumField() {
		name := tt.Field(i).Name
		switch name {
		case "MTU", "Paths", "Port", "Seed", "IDMask", "IDTag", "Congestion": // top level, or set by the daemon
			continue
		}
		f, ok := ft.FieldByName(name)
		if !ok {
			t.Errorf("transport.Config.%s has no key in the transport section", name)
			continue
		}
		if vf, ok := f.Type.FieldByName("v"); !ok || vf.Type != tt.Field(i).Type {
			t.Errorf("fileTransport.%s is %s, want a leaf of %s", name, f.Type, tt.Field(i).Type)
		}
	}
	if len(keys) != ft.NumField() {
		t.Errorf("%d tunables for %d fields", len(keys), ft.NumField())
	}
}

func TestSlogLevel(t *testing.T) {
	for s, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		c := Config{LogLevel: s}
		if got := c.SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestTransportConfigUnvalidated(t *testing.T) {
	c := valid()
	c.MTU, c.Paths, c.Port = 9000, 4, 5000
	if tc := c.TransportConfig(); tc.MTU != 9000 || tc.Paths != 4 || tc.Port != 5000 || tc.SendWindow != transport.Defaults.SendWindow {
		t.Errorf("before Validate: %+v", tc)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.TransportConfig() != c.Transport {
		t.Errorf("after Validate: TransportConfig %+v != Transport %+v", c.TransportConfig(), c.Transport)
	}
}

// TestMinimalConfig: the file `make install` puts in /etc sets the
// interfaces and nothing else, so every other key follows the defaults as
// they improve (deploy/metaroced.yaml, with every key, is the reference).
func TestMinimalConfig(t *testing.T) {
	c, err := Load("../../deploy/metaroced.minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Interfaces = []Interface{DefaultInterface("eth0")}
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, &want) {
		t.Fatalf("minimal config = %+v\nwant the defaults with eth0: %+v", c, want)
	}
}
