// Command metaroced is the MetaRoCE daemon: one per host, it runs the
// transport on the configured interfaces (AF_XDP, or UDP sockets where
// AF_XDP is not available) and serves local applications. See
// internal/daemon for what it does and deploy/metaroced.yaml for its
// configuration.
package main

import (
	"os"

	"github.com/metaroce/metaroce/internal/daemon"
)

func main() { os.Exit(daemon.Main("metaroced", os.Args[1:], os.Stderr)) }
