package config_test

import (
	"flag"
	"fmt"

	"github.com/metaroce/metaroce/control/config"
)

func Example() {
	fs := flag.NewFlagSet("metaroced", flag.ExitOnError)
	flags := config.BindFlags(fs)
	_ = fs.Parse([]string{"-log-level", "debug"})

	file := []byte(`
interfaces:
  - name: eth0
    queues: [0, 1]
mtu: 9000
log_level: warn
`)
	cfg, err := flags.Parse(file, "metaroced.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	tc := cfg.TransportConfig()
	fmt.Println(cfg.Interfaces[0].Name, cfg.Interfaces[0].Queues, cfg.Interfaces[0].Backend)
	fmt.Println(cfg.LogLevel, tc.MTU, tc.Port, tc.SendWindow)

	// A SIGHUP: the file changed.
	next, err := flags.Parse([]byte(`
interfaces: [{name: eth0, queues: [0, 1]}]
mtu: 1500
metrics_address: ""
`), "metaroced.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	changes, err := config.Reloadable(cfg, next)
	fmt.Println(changes, err)
	// Output:
	// eth0 [0 1] auto
	// debug 9000 4792 512
	// [metrics_address] mtu cannot change without a restart
}
