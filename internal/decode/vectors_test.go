package decode

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
	"github.com/metaroce/metaroce/wire/frame"
)

// specVector is one ```vector block of docs/spec.md §12.3: its keys in
// order and the packet its hex lines spell.
type specVector struct {
	name string
	keys []string
	vals map[string]string
	pkt  []byte
}

// readSpecVectors reads every packet vector of docs/spec.md.
func readSpecVectors(t testing.TB) []specVector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec.md"))
	if err != nil {
		t.Fatal(err)
	}
	var vs []specVector
	var cur *specVector
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```vector":
			cur = &specVector{vals: map[string]string{}}
		case cur != nil && line == "```":
			vs = append(vs, *cur)
			cur = nil
		case cur != nil:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			if k == "hex" {
				f := strings.Fields(v)
				for _, h := range f[1:] {
					x, err := hex.DecodeString(h)
					if err != nil {
						t.Fatalf("vector %s: hex %q: %v", cur.name, h, err)
					}
					cur.pkt = append(cur.pkt, x...)
				}
				continue
			}
			if k == "name" {
				cur.name = v
				continue
			}
			cur.keys = append(cur.keys, k)
			cur.vals[k] = v
		}
	}
	if len(vs) < 16 {
		t.Fatalf("docs/spec.md: %d packet vectors, want at least one per opcode (16)", len(vs))
	}
	return vs
}

// Ends of the vectors' story (§12.3): A is 10.0.0.1, B 10.0.0.2.
var (
	specA = frame.Endpoints{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 50000, DstPort: wire.DefaultPort}
)

// specA6 is specA over IPv6.
var specA6 = func() frame.Endpoints {
	ep := specA
	ep.Src, ep.Dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	return ep
}()

// withVLAN inserts an 802.1Q tag (VLAN 100, priority 3) after the MAC
// addresses, which a receiver must accept (spec §2.1).
func withVLAN(f []byte) []byte {
	out := append([]byte{}, f[:12]...)
	out = append(out, 0x81, 0x00, 0x60, 0x64)
	return append(out, f[12:]...)
}

// frameOf wraps a MetaRoCE packet in Ethernet, IPv4 and UDP as §2.1 says
// (DSCP by class, §2.4; ECT(0)).
func frameOf(t testing.TB, pkt []byte, ep frame.Endpoints) []byte {
	t.Helper()
	dscp := uint8(48)
	if len(pkt) > 1 && wire.Opcode(pkt[1]).Class() == wire.ClassData {
		dscp = 26
	}
	buf := make([]byte, frame.HeaderLen(ep.Src.Is6())+len(pkt))
	hl, err := frame.Build(buf, &ep, dscp, 2, len(pkt))
	if err != nil {
		t.Fatal(err)
	}
	copy(buf[hl:], pkt)
	if err := frame.Finish(buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

// writePcap writes frames, one per millisecond, to a file in dir.
func writePcap(t testing.TB, dir, name string, frames [][]byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	var b bytes.Buffer
	w, err := NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i, f := range frames {
		if err := w.WritePacket(t0.Add(time.Duration(i)*time.Millisecond), f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// vectorField maps a vector's key to the dissector's field and the value
// the field must print: names of §3.2, §6.2 and §7.5 become their codes.
func vectorField(t testing.TB, v specVector, k string) (name, want string) {
	t.Helper()
	val := v.vals[k]
	switch k {
	case "opcode":
		for i := range 256 {
			if wire.Opcode(i).String() == val {
				return "metaroce.opcode", strconv.Itoa(i)
			}
		}
	case "reason":
		if v.vals["opcode"] == "NACK" {
			for i := range 256 {
				if wire.NackReason(i).String() == val {
					return "metaroce.nack_reason", strconv.Itoa(i)
				}
			}
		} else {
			for i, n := range connReasons {
				if n == val {
					return "metaroce.conn_reason", strconv.Itoa(i)
				}
			}
		}
	default:
		return "metaroce." + k, val
	}
	t.Fatalf("vector %s: %s %q is not a name of the spec's tables", v.name, k, val)
	return "", ""
}

// TestVectorFields: decode's fields of every packet vector are the ones
// the vector lists, and every vector is valid.
func TestVectorFields(t *testing.T) {
	for _, v := range readSpecVectors(t) {
		fs, drop := Dissect(v.pkt)
		if drop != "" {
			t.Errorf("vector %s: dropped (%s)", v.name, drop)
		}
		for _, k := range v.keys {
			name, want := vectorField(t, v, k)
			if got := fs.Get(name); !sameValue(got, want) {
				t.Errorf("vector %s: %s = %q, spec %q", v.name, name, got, want)
			}
		}
		if fs.Get("metaroce.crc.status") != "1" {
			t.Errorf("vector %s: crc status %q", v.name, fs.Get("metaroce.crc.status"))
		}
	}
}

// TestFrameExample: frameOf wraps a vector as spec §12.5 shows it: the
// ```frame block's addresses, ports, DSCP and ECN around the vector it
// carries give exactly its bytes.
func TestFrameExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "```frame\n")
	if i < 0 {
		t.Fatal("docs/spec.md has no frame block")
	}
	block := doc[i+len("```frame\n"):]
	block = block[:strings.Index(block, "```")]
	vals := map[string]string{}
	var want []byte
	for _, line := range strings.Split(block, "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		if k == "hex" {
			for _, h := range strings.Fields(v)[1:] {
				x, _ := hex.DecodeString(h)
				want = append(want, x...)
			}
		} else if k != "" {
			vals[k] = v
		}
	}
	var pkt []byte
	for _, v := range readSpecVectors(t) {
		if v.name == vals["carries"] {
			pkt = v.pkt
		}
	}
	mac := func(s string) (m [6]byte) {
		hw, err := net.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		copy(m[:], hw)
		return m
	}
	port := func(s string) uint16 { n, _ := strconv.Atoi(s); return uint16(n) }
	ep := frame.Endpoints{SrcMAC: mac(vals["src_mac"]), DstMAC: mac(vals["dst_mac"]),
		Src: netip.MustParseAddr(vals["src_ip"]), Dst: netip.MustParseAddr(vals["dst_ip"]),
		SrcPort: port(vals["src_port"]), DstPort: port(vals["dst_port"])}
	if vals["dscp"] != "48" || vals["ecn"] != "2" {
		t.Fatalf("frame example with DSCP %s ECN %s: frameOf writes 48 and 2 for control packets", vals["dscp"], vals["ecn"])
	}
	if got := frameOf(t, pkt, ep); !bytes.Equal(got, want) {
		t.Fatalf("frameOf(%s)\n got %x\nwant %x", vals["carries"], got, want)
	}
}
