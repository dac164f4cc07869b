package config

import (
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics, its verdict is deterministic, and a
// configuration it accepts is a fixed point of Validate.
func FuzzParse(f *testing.F) {
	f.Add(readExample(f))
	for _, s := range []string{
		base,
		flagFile,
		"",
		base + "port: 0\n",
		base + "transport: {ack_delay: 10us, min_rto: 1ms, max_rto: 2ms, initial_rto: 1ms}\n",
		"interfaces: [{name: eth0, queues: [3, 1], backend: afxdp, xdp_mode: native, zerocopy: on, address: 10.0.0.1}]\n",
		"interfaces: [{name: eth0, address: \"fe80::1%eth0\"}]\nsocket_mode: 0600\n",
		"interfaces: &a [{name: eth0}]\nlimits: {max_sessions: 1}\n",
		base + "---\n" + base,
		base + "unknown: 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		_, err2 := Parse(data, "fuzz.yaml")
		if errString(err) != errString(err2) {
			t.Fatalf("two verdicts:\n%v\n%v", err, err2)
		}
		if err != nil {
			return
		}
		d := clone(c)
		if err := d.Validate(); err != nil {
			t.Fatalf("a parsed config does not re-validate: %v", err)
		}
		if !reflect.DeepEqual(c, d) {
			t.Fatalf("Validate changed a parsed config:\n%+v\n%+v", c, d)
		}
		if c.TransportConfig() != c.Transport {
			t.Fatalf("TransportConfig %+v != Transport %+v", c.TransportConfig(), c.Transport)
		}
		if changes, err := Reloadable(c, d); len(changes) != 0 || err != nil {
			t.Fatalf("Reloadable(c, c) = %q, %v", changes, err)
		}
	})
}
