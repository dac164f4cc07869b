package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		code Code
	}{
		{`{"v":1,"op":"hello","seq":3}`, ""},
		{`{"v":2,"op":"hello","seq":3}`, CodeVersion},
		{`[1,2]`, CodeBadRequest},
		{`{"v":1,"op":"reg_mr","length":"x"}`, CodeBadRequest},
		{``, CodeBadRequest},
		{string(bytes.Repeat([]byte(" "), MaxMessage+1)), CodeBadRequest},
	} {
		var r Request
		h, err := Decode([]byte(tc.in), &r)
		var pe *Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%.40q: %v", tc.in, err)
		case tc.code == "" && (h.Op != "hello" || h.Seq != 3):
			t.Errorf("%.40q: header %+v", tc.in, h)
		case tc.code != "" && (!errors.As(err, &pe) || pe.Code != tc.code):
			t.Errorf("%.40q: %v, want code %s", tc.in, err, tc.code)
		}
	}
}

func TestWRRoundTrip(t *testing.T) {
	w := WR{Op: WRWriteImm, Stream: 3, LKey: 0xdeadbeef, WRID: 1<<63 + 5, LAddr: 0x7f0000001000, Length: 65536,
		RKey: 0x12345678, RAddr: 0x7f0000200000, Imm: 42}
	var s [WRSize]byte
	for i := range s {
		s[i] = 0xff // Put must clear the reserved bytes
	}
	w.Put(s[:])
	got, ok := ParseWR(s[:])
	if !ok || got != w {
		t.Fatalf("round trip %+v -> %+v (%v)", w, got, ok)
	}
	s[50] = 1
	if _, ok := ParseWR(s[:]); ok {
		t.Error("reserved byte set: accepted")
	}
	s[50] = 0
	s[0] = 99
	if _, ok := ParseWR(s[:]); ok {
		t.Error("unknown op accepted")
	}
	c := CQE{WRID: 9, Op: CQRecvWriteImm, Status: StatusRemoteAccess, HasImm: true, Bytes: 100, Imm: 7, Stream: 2, QPN: 0xabcdef}
	var cs [CQESize]byte
	c.Put(cs[:])
	if got, ok := ParseCQE(cs[:]); !ok || got != c {
		t.Fatalf("completion round trip %+v -> %+v", c, got)
	}
	// Inline data rides in bytes 44..63, only on WRITE and SEND, at most
	// MaxInline bytes, with no lkey or local address.
	in := WR{Op: WRSendImm, Flags: WRInline | WRUnsignaled, WRID: 3, Length: MaxInline, Imm: 9}
	for i := range in.Inline {
		in.Inline[i] = byte(i + 1)
	}
	var is [WRSize]byte
	in.Put(is[:])
	if got, ok := ParseWR(is[:]); !ok || got != in {
		t.Fatalf("inline round trip %+v -> %+v", in, got)
	}
	for name, bad := range map[string]func(w *WR){
		"too long": func(w *WR) { w.Length = MaxInline + 1 },
		"read":     func(w *WR) { w.Op = WRRead },
		"recv":     func(w *WR) { w.Op = WRRecv },
		"lkey":     func(w *WR) { w.LKey = 1 },
		"flag":     func(w *WR) { w.Flags |= 8 },
		"sgl":      func(w *WR) { w.Flags |= WRSGL },
	} {
		w := in
		bad(&w)
		w.Put(is[:])
		if _, ok := ParseWR(is[:]); ok {
			t.Errorf("inline %s accepted", name)
		}
	}
	// A connection event: its kind in byte 11, which a completion keeps 0.
	ev := CQE{Op: CQEvent, Event: EventRetryExceeded, Status: StatusRetryExceeded}
	ev.Put(cs[:])
	if cs[11] != byte(EventRetryExceeded) {
		t.Fatalf("event kind at byte 11: %d", cs[11])
	}
	if got, ok := ParseCQE(cs[:]); !ok || got != ev {
		t.Fatalf("event round trip %+v -> %+v", ev, got)
	}
	cs[11] = 0
	if _, ok := ParseCQE(cs[:]); ok {
		t.Error("event without a kind accepted")
	}
	cs[11] = 99
	if _, ok := ParseCQE(cs[:]); ok {
		t.Error("unknown event kind accepted")
	}
	c.Put(cs[:])
	cs[11] = 1
	if _, ok := ParseCQE(cs[:]); ok {
		t.Error("completion with an event kind accepted")
	}
}

// TestSGLRoundTrip: a request with a scatter-gather list is its slot and
// a continuation slot; each parses back to what was put, and every
// inconsistency is refused.
func TestSGLRoundTrip(t *testing.T) {
	w := WR{Op: WRWrite, Flags: WRSGL | WRUnsignaled, WRID: 77, Length: 10 + 20 + 30 + 40, RKey: 5, RAddr: 0x9000, NSGE: 4,
		SGL: [MaxSGE]SGE{{0x1000, 10, 1}, {0x2000, 20, 2}, {0x3000, 30, 1}, {0x4000, 40, 3}}}
	if w.Slots() != 2 || MaxSGE != 4 {
		t.Fatalf("slots %d, MaxSGE %d", w.Slots(), MaxSGE)
	}
	var s, c [WRSize]byte
	w.Put(s[:])
	w.PutSGL(c[:])
	got, ok := ParseWR(s[:])
	if !ok || !ParseSGL(&got, c[:]) || got != w {
		t.Fatalf("round trip %+v -> %+v (%v)", w, got, ok)
	}
	for name, bad := range map[string]func(w *WR){
		"no entries": func(w *WR) { w.NSGE = 0 },
		"too many":   func(w *WR) { w.NSGE = MaxSGE + 1 },
		"lkey":       func(w *WR) { w.LKey = 1 },
		"recv":       func(w *WR) { w.Op = WRRecv },
		"inline":     func(w *WR) { w.Flags |= WRInline },
	} {
		b := w
		bad(&b)
		b.Put(s[:])
		if _, ok := ParseWR(s[:]); ok {
			t.Errorf("sgl %s: slot accepted", name)
		}
	}
	w.Put(s[:])
	s[50] = 1
	if _, ok := ParseWR(s[:]); ok {
		t.Error("sgl: reserved byte set: accepted")
	}
	short := w
	short.Length--
	if ParseSGL(&short, c[:]) {
		t.Error("sgl: lengths not adding up to the request's accepted")
	}
	two := w
	two.NSGE = 2
	if ParseSGL(&two, c[:]) {
		t.Error("sgl: an entry past the count accepted")
	}
}

// FuzzParseSGL: a request slot and its continuation either parse into a
// request that writes back to the same bytes, or are refused.
func FuzzParseSGL(f *testing.F) {
	w := WR{Op: WRSend, Flags: WRSGL, Length: 3, NSGE: 2, SGL: [MaxSGE]SGE{{1, 1, 1}, {2, 2, 2}}}
	var s, c [WRSize]byte
	w.Put(s[:])
	w.PutSGL(c[:])
	f.Add(append(s[:], c[:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2*WRSize {
			return
		}
		w, ok := ParseWR(b)
		if !ok || w.Flags&WRSGL == 0 || !ParseSGL(&w, b[WRSize:]) {
			return
		}
		var out [2 * WRSize]byte
		w.Put(out[:])
		w.PutSGL(out[WRSize:])
		if !bytes.Equal(out[:], b[:2*WRSize]) {
			t.Fatalf("slots %x parsed as %+v write back as %x", b[:2*WRSize], w, out)
		}
	})
}

// FuzzDecode: any bytes give a header or an error, never a panic, and a
// request that decodes re-encodes to one that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"op":"reg_mr","seq":1,"offset":0,"length":4096,"addr":140000000,"access":7}`))
	f.Add([]byte(`{"v":1,"op":"connect","seq":2,"qpn":77,"peer":"10.0.0.2","remote_qpn":9}`))
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		h, err := Decode(b, &r)
		if err != nil {
			return
		}
		if h.V != Version {
			t.Fatalf("accepted version %d", h.V)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var r2 Request
		if len(r.Private) == 0 {
			r.Private = nil // an empty hex string is omitted, and comes back nil
		}
		if _, err := Decode(out, &r2); err != nil || !reflect.DeepEqual(r2, r) {
			t.Fatalf("re-decode: %v\n%+v\n%+v", err, r, r2)
		}
	})
}

// FuzzParseWR: a slot either parses into a request that writes back to
// the same bytes, or is refused.
func FuzzParseWR(f *testing.F) {
	var s [WRSize]byte
	(&WR{Op: WRRead, LKey: 1, WRID: 2, LAddr: 3, Length: 4, RKey: 5, RAddr: 6}).Put(s[:])
	f.Add(s[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		w, ok := ParseWR(b)
		if !ok {
			return
		}
		var out [WRSize]byte
		w.Put(out[:])
		if !bytes.Equal(out[:], b[:WRSize]) {
			t.Fatalf("slot %x parsed as %+v writes back as %x", b[:WRSize], w, out)
		}
	})
}

// TestSendChunked: a value larger than one message arrives as chunks
// that reassemble to it, ended by ChunkLast.
func TestSendChunked(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *Conn {
		c, err := net.FileConn(os.NewFile(uintptr(fd), "sp"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return NewConn(c.(*net.UnixConn))
	}
	a, b := conn(fds[0]), conn(fds[1])
	val := bytes.Repeat([]byte("0123456789abcdef"), 3*MaxMessage/16+5) // three chunks and a bit
	done := make(chan error, 1)
	go func() { done <- a.SendChunked(val) }()
	var got []byte
	for n := 0; ; n++ {
		msg, _, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msg[1:]...)
		if msg[0] == ChunkLast {
			if n != 3 {
				t.Errorf("%d chunks, want 4", n+1)
			}
			break
		}
		if msg[0] != ChunkMore {
			t.Fatalf("chunk marker %q", msg[0])
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, val) {
		t.Errorf("reassembled %d bytes, sent %d", len(got), len(val))
	}
}
