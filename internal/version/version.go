// Package version says which build of metaroce is running. `make build`
// stamps Version with `git describe` through -ldflags; a plain `go build`
// in a checkout falls back to the VCS revision the Go toolchain records in
// the binary's build info, and `go run` (which records neither) reports
// "devel".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at link time: -X github.com/metaroce/metaroce/internal/version.Version=v1.2.3
var Version = ""

// String is one line: the version, the revision and whether the tree was
// modified, and the Go toolchain.
func String() string {
	v, rev, dirty := Version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		switch {
		case rev != "":
			v = rev[:min(12, len(rev))]
			if dirty {
				v += "-dirty"
			}
		default:
			v = "devel"
		}
	}
	return fmt.Sprintf("%s (%s, %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
