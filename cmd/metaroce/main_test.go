package main

import (
	"os"
	"testing"

	"github.com/metaroce/metaroce/internal/daemon"
)

// TestMain lets this test binary stand in for the metaroce binary when
// compliance -spawn starts a daemon from it (os.Executable() is the test
// binary here).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "daemon" {
		os.Exit(daemon.Main("metaroce daemon", os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}
