package transport_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestJumboPacketsFillTheBuffer: at MTU 9000 a full data packet is the
// MTU less IPv6 and UDP headers (8952 bytes), what a link must hold.
func TestJumboPacketsFillTheBuffer(t *testing.T) {
	l := newLoopMTU(t, 9000)
	if l.a.MaxPacket() != 9000-48 {
		t.Fatalf("MaxPacket %d at mtu 9000, want %d", l.a.MaxPacket(), 9000-48)
	}
	l.sendSide()
	full := 0
	for _, n := range l.dataLen[:l.nd] {
		if n == 9000-48 {
			full++
		}
		if n > 9000-48 {
			t.Fatalf("a %d-byte packet at mtu 9000", n)
		}
	}
	if full == 0 {
		t.Fatalf("no full-size packet in %d: %v", l.nd, l.dataLen[:l.nd])
	}
	for i := 0; i < 50; i++ {
		l.recvSide()
		l.sendSide()
	}
}

// TestShortTransmitBuffer: a link buffer shorter than the configured MTU
// needs (the AF_XDP backend's 1986 bytes at MTU 9000, before jumbo
// support) panics with a message that names both sizes and the MTU, not a
// slice bound.
func TestShortTransmitBuffer(t *testing.T) {
	l := newLoopMTU(t, 9000)
	for i := range l.data {
		l.data[i] = make([]byte, 2048-62)
	}
	defer func() {
		r := recover()
		msg := fmt.Sprint(r)
		if r == nil || !strings.Contains(msg, "mtu 9000") || !strings.Contains(msg, "1986") ||
			!strings.Contains(msg, fmt.Sprint(9000-48)) {
			t.Fatalf("recovered %v", r)
		}
	}()
	l.sendSide()
}
