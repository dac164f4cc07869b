package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/control/proto"
)

// TestOpErrorSaysEachPartOnce: a refused request matches its kind and its
// protocol error, and its text names the operation and the daemon's
// message once each, the code not repeated.
func TestOpErrorSaysEachPartOnce(t *testing.T) {
	err := error(&opError{kind: ErrConnect, op: "connect",
		pe: &proto.Error{Code: proto.CodeConnect, Msg: "connection to 10.0.0.2 failed: retry_exceeded"}})
	var pe *proto.Error
	if !errors.Is(err, ErrConnect) || !errors.As(err, &pe) || pe.Code != proto.CodeConnect {
		t.Fatalf("%v: kind or protocol error lost", err)
	}
	want := "metaroce: connect failed: connect: connection to 10.0.0.2 failed: retry_exceeded"
	if err.Error() != want {
		t.Fatalf("got %q, want %q", err.Error(), want)
	}
	if strings.Count(err.Error(), "connect_failed") != 0 {
		t.Fatalf("code repeated: %q", err.Error())
	}
}
