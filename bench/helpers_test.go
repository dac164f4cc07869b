package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, XDP programs, AF_XDP sockets (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW)")
	}
}

// testCtx bounds a measurement well above its own duration, so a hung run
// fails the test instead of the binary's timeout.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
