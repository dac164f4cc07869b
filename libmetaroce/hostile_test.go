package libmetaroce

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
)

// fakeRing makes a ring memfd by hand (ring/layout.go) so a test can lie
// in its header or its index words. It returns the fd and the mapping.
func fakeRing(t *testing.T, slots, slotSize, fileBytes uint32, sealed bool) (int, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("fake-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	if fileBytes == 0 {
		fileBytes = 256 + slots*slotSize
	}
	if err := unix.Ftruncate(fd, int64(fileBytes)); err != nil {
		t.Fatal(err)
	}
	if sealed {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := unix.Mmap(fd, 0, int(fileBytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem); unix.Close(fd) })
	for i, v := range []uint32{0x4752524d, 1, slotSize, slots} {
		*(*uint32)(unsafe.Pointer(&mem[4*i])) = v
	}
	return fd, mem
}

func word(mem []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

// hostileCases: what the fake daemon does wrong, by name; mrtest's hostile
// mode knows what each must produce. Cases starting "hello-" spoil the
// hello reply, the others the create_qp reply (or the rings it passes).
var hostileCases = []string{
	"hello-garbage", "hello-short", "hello-seq", "hello-fds", "hello-version",
	"fds-two", "fds-five", "bell-pipe", "ring-unsealed", "ring-chardev", "ring-header", "ring-short",
	"qpn-zero", "code", "cq-index", "sq-index", "bad-cqe",
	// Issue 20's replies and entries: private data too long, odd or not
	// hex (connect, get_request, a rejection's), an app_reason past 16
	// bits, deep nesting in a rejection, an unknown state or a reason
	// with a quote (query_qp), an event in the CQ of a queue pair that
	// asked for none and one of an unknown kind, and one good rejection
	// read back field by field.
	"private-long", "private-odd", "private-nothex", "request-private-long", "rejection-private-long",
	"rejection-app-reason", "rejection-deep", "rejection-good", "query-state", "query-reason", "event-unasked",
	"event-unknown",
	// Not a lie but a look at what create_qp carries: rnr_retry_forever
	// when mr_qp_attr asks for it, and in no other case (the fake daemon
	// refuses a create_qp that disagrees, bad_request).
	"attr-rnr-forever",
}

// hostileReplies: what the fake daemon answers to the operations after
// create_qp, per case (nil: a plain ok).
var hostileReplies = map[string]map[string]any{
	"private-long":           {"code": "ok", "peer": "10.0.0.2", "private": strings.Repeat("ab", 65)},
	"private-odd":            {"code": "ok", "peer": "10.0.0.2", "private": "abc"},
	"private-nothex":         {"code": "ok", "peer": "10.0.0.2", "private": "zz"},
	"request-private-long":   {"code": "ok", "peer": "10.0.0.2", "request": 5, "private": strings.Repeat("0", 4000)},
	"rejection-private-long": {"code": "connect_failed", "error": "no", "rejection": map[string]any{"reason": "application", "private": strings.Repeat("cd", 200)}},
	"rejection-app-reason":   {"code": "connect_failed", "error": "no", "rejection": map[string]any{"reason": "application", "app_reason": 70000}},
	"rejection-deep":         {"code": "connect_failed", "error": "no", "rejection": map[string]any{"reason": "application", "x": deep(40)}},
	"rejection-good":         {"code": "connect_failed", "error": "no", "rejection": map[string]any{"reason": strings.Repeat("application", 5), "app_reason": 7, "private": "0a0b", "extra": []any{1, map[string]any{}}}},
	"query-state":            {"code": "ok", "state": "weird", "peer": "10.0.0.2"},
	"query-reason":           {"code": "ok", "state": "closed", "reason": "fl\"ushed"},
}

// deep nests n arrays.
func deep(n int) any {
	var v any = 1
	for range n {
		v = []any{v}
	}
	return v
}

// serveHostile answers one session as case c says.
func serveHostile(t *testing.T, c *net.UnixConn, cs string) {
	defer c.Close()
	pc := proto.NewConn(c)
	reply := func(h proto.Header, extra map[string]any, fds ...int) {
		m := map[string]any{"v": 1, "seq": h.Seq, "code": "ok"}
		for k, v := range extra {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		c.WriteMsgUnix(b, oob, nil)
	}
	for {
		msg, files, err := pc.Recv()
		if err != nil {
			return
		}
		for _, f := range files {
			f.Close()
		}
		var req proto.Request
		h, err := proto.Decode(msg, &req)
		if err != nil {
			return
		}
		switch h.Op {
		case proto.OpHello:
			switch cs {
			case "hello-garbage":
				c.Write([]byte("\x00\xffnot json"))
			case "hello-short":
				c.Write([]byte(`{"v":1,"seq":1,"code":"o`))
			case "hello-seq":
				reply(proto.Header{Seq: h.Seq + 5}, nil)
			case "hello-version":
				b, _ := json.Marshal(map[string]any{"v": 2, "seq": h.Seq, "code": "ok"})
				c.Write(b)
			case "hello-fds":
				fd, _ := fakeRing(t, 8, 64, 0, true)
				reply(h, nil, fd, fd, fd, fd)
			default:
				reply(h, map[string]any{"max_qps": 4, "nested": map[string]any{"a": []any{1, "x", map[string]any{}}}})
			}
		case proto.OpCreateQP:
			if want := cs == "attr-rnr-forever"; req.RNRRetryForever != want {
				b, _ := json.Marshal(map[string]any{"v": 1, "seq": h.Seq, "code": "bad_request",
					"error": fmt.Sprintf("rnr_retry_forever %v, want %v", req.RNRRetryForever, want)})
				c.Write(b)
				continue
			}
			sq, sqm := fakeRing(t, 256, 64, 0, true)
			cq, cqm := fakeRing(t, 1024, 32, 0, true)
			bells, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer unix.Close(bells[0])
			defer unix.Close(bells[1])
			bell := bells[1]
			ok := map[string]any{"qpn": 77, "local": "10.0.0.1", "max_payload": 1400}
			switch cs {
			case "fds-two":
				reply(h, ok, sq, cq)
			case "fds-five":
				reply(h, ok, sq, cq, bell, sq, cq)
			case "bell-pipe":
				var p [2]int
				unix.Pipe2(p[:], unix.O_CLOEXEC)
				reply(h, ok, sq, cq, p[0])
				unix.Close(p[0])
				unix.Close(p[1])
			case "ring-unsealed":
				u, _ := fakeRing(t, 256, 64, 0, false)
				reply(h, ok, u, cq, bell)
			case "ring-chardev":
				f, _ := os.Open("/dev/zero")
				reply(h, ok, int(f.Fd()), cq, bell)
				f.Close()
			case "ring-header":
				// Claims 4096 slots of 64 bytes in a file of 256 + 64.
				bad, _ := fakeRing(t, 4096, 64, 256+64, true)
				reply(h, ok, bad, cq, bell)
			case "ring-short":
				small, _ := fakeRing(t, 256, 16, 0, true) // slots too small for a WR
				reply(h, ok, small, cq, bell)
			case "qpn-zero":
				reply(h, map[string]any{"local": "10.0.0.1"}, sq, cq, bell)
			case "code":
				m := map[string]any{"v": 1, "seq": h.Seq, "code": "limit", "error": "too \"many\" \u00e9 qps"}
				b, _ := json.Marshal(m)
				c.WriteMsgUnix(b, unix.UnixRights(sq, cq, bell), nil)
			case "cq-index":
				atomic.StoreUint32(word(cqm, 64), 5000) // producer more than a ring ahead
				reply(h, ok, sq, cq, bell)
			case "sq-index":
				atomic.StoreUint32(word(sqm, 128), 1<<31) // consumer ahead of anything published
				reply(h, ok, sq, cq, bell)
			case "bad-cqe":
				cqm[256+8] = 99 // completion op 99
				atomic.StoreUint32(word(cqm, 64), 1)
				reply(h, ok, sq, cq, bell)
			case "event-unasked", "event-unknown":
				cqm[256+8] = 6 // an event
				cqm[256+11] = 1
				if cs == "event-unknown" {
					cqm[256+11] = 9
				}
				atomic.StoreUint32(word(cqm, 64), 1)
				reply(h, ok, sq, cq, bell)
			default:
				reply(h, ok, sq, cq, bell)
			}
		default:
			if m, ok := hostileReplies[cs]; ok {
				m = maps.Clone(m)
				m["v"], m["seq"] = 1, h.Seq
				b, _ := json.Marshal(m)
				c.Write(b)
				continue
			}
			reply(h, nil)
		}
	}
}

// TestCLibraryHostileDaemon runs mrtest's hostile mode against a fake
// daemon that lies in each way of hostileCases: malformed, short or
// out-of-sequence replies, the wrong number or kind of descriptors, ring
// headers that overstate the file or understate the slot, impossible ring
// indices and completions. The library must refuse each with the right
// code, and AddressSanitizer (the build) proves it touched nothing
// outside its mappings and leaked nothing.
func TestCLibraryHostileDaemon(t *testing.T) {
	dir := t.TempDir()
	bin := buildC(t, dir, "mrtest")
	for _, cs := range hostileCases {
		t.Run(cs, func(t *testing.T) {
			sock := filepath.Join(dir, cs+".sock")
			ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.AcceptUnix()
					if err != nil {
						return
					}
					go serveHostile(t, c, cs)
				}
			}()
			cmd := exec.Command(bin, "hostile", sock, cs)
			cmd.Env = append(os.Environ(), asanEnv)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "PASS") {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}
