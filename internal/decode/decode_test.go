package decode

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/wire"
)

// storyFrames frames the §12.3 vectors as the story they tell: A
// (10.0.0.1, id 0x1c2d3e4f) and B (10.0.0.2, id 0x8a3f19c2), each packet
// sent by the end it is from (the one whose peer's id is its DstConn).
func storyFrames(t testing.TB) ([]specVector, [][]byte) {
	t.Helper()
	vs := readSpecVectors(t)
	b := specA
	b.Src, b.Dst, b.SrcMAC, b.DstMAC = specA.Dst, specA.Src, specA.DstMAC, specA.SrcMAC
	var frames [][]byte
	for _, v := range vs {
		ep := b
		if dst := wire.Prefix(v.pkt).DstConn(); dst == 0x8a3f19c2 || (dst == 0 && wire.Opcode(v.pkt[1]) == wire.OpConnect) {
			ep = specA
		}
		frames = append(frames, frameOf(t, v.pkt, ep))
	}
	return vs, frames
}

// TestSummaryOfTheStory: the summary of the vectors' story joins A's and
// B's ids into one connection, counts opcodes per direction, times the
// write vector's round trip from the ack that echoes it, and lists the
// handshake in order.
func TestSummaryOfTheStory(t *testing.T) {
	_, frames := storyFrames(t)
	file := writePcap(t, t.TempDir(), "story.pcap", frames)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, pkts, err := Decode(f, wire.DefaultPort)
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != len(frames) || s.Packets != len(frames) || len(pkts) != len(frames) || s.Drops != nil {
		t.Fatalf("records %d packets %d drops %v, want %d valid", s.Records, s.Packets, s.Drops, len(frames))
	}
	var c *ConnSummary
	for _, x := range s.Connections {
		if x.A == "10.0.0.1/0x1c2d3e4f" {
			c = x
		}
	}
	if c == nil || c.B != "10.0.0.2/0x8a3f19c2" || len(c.Directions) != 2 {
		t.Fatalf("connection of A: %+v (all: %d)", c, len(s.Connections))
	}
	ab, ba := c.Directions[0], c.Directions[1]
	want := map[string]int{"CONNECT": 2, "WRITE": 3, "WRITE_IMM": 1, "SEND": 1, "SEND_IMM": 1, "READ_REQ": 1, "PROBE": 1, "DISCONNECT": 1}
	if !mapsEqual(ab.Opcodes, want) {
		t.Errorf("A>B opcodes %v, want %v", ab.Opcodes, want)
	}
	wantBA := map[string]int{"CHALLENGE": 1, "ACCEPT": 1, "READ_RESP": 1, "ACK": 2, "NACK": 4, "DISCONNECT_ACK": 1}
	if !mapsEqual(ba.Opcodes, wantBA) {
		t.Errorf("B>A opcodes %v, want %v", ba.Opcodes, wantBA)
	}
	if !mapsEqual(ab.Nacks, map[string]int{"RNR": 1, "REMOTE_ACCESS": 1, "UNSUPPORTED_VERSION": 1, "SEQUENCE": 1}) {
		t.Errorf("NACKs A received: %v", ab.Nacks)
	}
	// The write vector is frame 6, the ack echoing its Timestamp frame
	// 12, 6 ms later, with an AckDelay of 2500 ns; ack-rate-hint echoes
	// a timestamp no packet of the capture carries, so gives no sample.
	if ab.RTT == nil || ab.RTT.Samples != 1 || ab.RTT.MinUs != 5997.5 {
		t.Errorf("A's RTT %+v, want 1 sample of 5997.5 us", ab.RTT)
	}
	// write-void and write-void-repair are retransmissions (RETX), as
	// write-imm-retx is.
	if ab.Retransmits != 3 || ab.Transmits != 8 || ab.DataEntropy != 1 {
		t.Errorf("A: %d transmissions, %d retransmissions, %d entropy values", ab.Transmits, ab.Retransmits, ab.DataEntropy)
	}
	var ops []string
	for _, e := range c.Handshake {
		ops = append(ops, e.From+":"+e.Opcode)
	}
	if got, want := strings.Join(ops, " "), "A:CONNECT B:CHALLENGE A:CONNECT B:ACCEPT A:WRITE B:READ_RESP A:DISCONNECT B:DISCONNECT_ACK"; got != want {
		t.Errorf("timeline\n got %s\nwant %s", got, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRun: the command's conventions (internal/cli): -h exits 0 with the
// usage, a missing file is an error naming it, a second file or none is a
// usage error, the file may come before the flags, -json is JSON.
func TestRun(t *testing.T) {
	_, frames := storyFrames(t)
	file := writePcap(t, t.TempDir(), "story.pcap", frames)
	var out bytes.Buffer
	if err := Run([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) || cli.Exit("metaroce decode", err, io.Discard) != 0 {
		t.Errorf("-h: %v", err)
	}
	if !strings.Contains(out.String(), "usage: metaroce decode") {
		t.Errorf("-h printed %q", out.String())
	}
	missing := filepath.Join(t.TempDir(), "nope.pcap")
	if err := Run([]string{missing}, io.Discard); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	notPcap := filepath.Join(t.TempDir(), "x.txt")
	os.WriteFile(notPcap, []byte("hello, world, this is not a capture"), 0o644)
	if err := Run([]string{notPcap}, io.Discard); err == nil || !strings.Contains(err.Error(), notPcap) || !errors.Is(err, ErrFormat) {
		t.Errorf("not a capture: %v", err)
	}
	for _, args := range [][]string{{}, {file, file}, {"-port", "0", file}} {
		if err := Run(args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	out.Reset()
	if err := Run([]string{file, "-json", "-packets", "-port", "4792"}, &out); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Packets     int `json:"metaroce_packets"`
		Connections []struct {
			A, B string
		}
		PacketList []struct {
			Frame  int
			Opcode string
			Fields map[string]string
		} `json:"packets"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("-json: %v\n%s", err, out.String())
	}
	if s.Packets != len(frames) || len(s.PacketList) != len(frames) || s.PacketList[5].Fields["metaroce.psn"] != "0x9e3779be" {
		t.Errorf("-json: %d packets, list %d", s.Packets, len(s.PacketList))
	}
	// The summary alone keeps only each packet's headers: a conn
	// packet's must still name both ends, or the two sides of a
	// connection are reported as two half connections.
	out.Reset()
	if err := Run([]string{file}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "connection A=10.0.0.1/0x1c2d3e4f B=10.0.0.2/0x8a3f19c2"; !strings.Contains(out.String(), want) {
		t.Errorf("summary without -packets lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	if err := Run([]string{"-packets", file}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"10.0.0.1:50000 > 10.0.0.2:4792 WRITE", "psn=0x9e3779be", "sack.missing=39",
		"connection A=10.0.0.1/0x1c2d3e4f B=10.0.0.2/0x8a3f19c2", "timeline:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
}

// ngBlock is one pcapng block in little-endian order.
func ngBlock(typ uint32, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	b := binary.LittleEndian.AppendUint32(nil, typ)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(body)+12))
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, uint32(len(body)+12))
}

// pcapng writes frames as pcapng with nanosecond stamps (if_tsresol 9).
func pcapng(frames [][]byte, t0 time.Time) []byte {
	shb := binary.LittleEndian.AppendUint32(nil, 0x1a2b3c4d)
	shb = binary.LittleEndian.AppendUint16(shb, 1)
	shb = binary.LittleEndian.AppendUint16(shb, 0)
	shb = binary.LittleEndian.AppendUint64(shb, ^uint64(0))
	out := ngBlock(0x0a0d0d0a, shb)
	idb := binary.LittleEndian.AppendUint16(nil, linkEthernet)
	idb = append(idb, 0, 0)
	idb = binary.LittleEndian.AppendUint32(idb, 0)
	idb = append(idb, 9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0) // if_tsresol 9, end of options
	out = append(out, ngBlock(1, idb)...)
	out = append(out, ngBlock(5, []byte{1, 2, 3, 4})...) // interface statistics: skipped
	for i, f := range frames {
		ts := uint64(t0.Add(time.Duration(i) * time.Millisecond).UnixNano())
		epb := binary.LittleEndian.AppendUint32(nil, 0)
		epb = binary.LittleEndian.AppendUint32(epb, uint32(ts>>32))
		epb = binary.LittleEndian.AppendUint32(epb, uint32(ts))
		epb = binary.LittleEndian.AppendUint32(epb, uint32(len(f)))
		epb = binary.LittleEndian.AppendUint32(epb, uint32(len(f)))
		epb = append(epb, f...)
		out = append(out, ngBlock(6, epb)...)
	}
	return out
}

// TestFormats: the same frames as pcap, big-endian pcap, pcapng and a
// Linux cooked capture decode to the same packets at the same times.
func TestFormats(t *testing.T) {
	_, frames := storyFrames(t)
	t0 := time.Unix(1_700_000_000, 0)
	var ref bytes.Buffer
	w, _ := NewWriter(&ref)
	for i, f := range frames {
		w.WritePacket(t0.Add(time.Duration(i)*time.Millisecond), f)
	}
	// Big-endian microsecond pcap.
	be := binary.BigEndian.AppendUint32(nil, 0xa1b2c3d4)
	be = append(be, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 1)
	// Linux cooked (SLL): 16-byte header, protocol at 14.
	sll := binary.LittleEndian.AppendUint32(nil, 0xa1b23c4d)
	sll = append(sll, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, linkSLL, 0, 0, 0)
	for i, f := range frames {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		be = binary.BigEndian.AppendUint32(be, uint32(ts.Unix()))
		be = binary.BigEndian.AppendUint32(be, uint32(ts.Nanosecond()/1000))
		be = binary.BigEndian.AppendUint32(be, uint32(len(f)))
		be = binary.BigEndian.AppendUint32(be, uint32(len(f)))
		be = append(be, f...)
		cooked := append(make([]byte, 14), f[12:]...)
		sll = binary.LittleEndian.AppendUint32(sll, uint32(ts.Unix()))
		sll = binary.LittleEndian.AppendUint32(sll, uint32(ts.Nanosecond()))
		sll = binary.LittleEndian.AppendUint32(sll, uint32(len(cooked)))
		sll = binary.LittleEndian.AppendUint32(sll, uint32(len(cooked)))
		sll = append(sll, cooked...)
	}
	decodeAll := func(name string, b []byte) []*Packet {
		_, pkts, err := Decode(bytes.NewReader(b), wire.DefaultPort)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return pkts
	}
	want := decodeAll("pcap", ref.Bytes())
	for name, b := range map[string][]byte{"pcap big-endian": be, "pcapng": pcapng(frames, t0), "linux cooked": sll} {
		got := decodeAll(name, b)
		if len(got) != len(want) {
			t.Fatalf("%s: %d packets, want %d", name, len(got), len(want))
		}
		for i := range got {
			if !got[i].Time.Equal(want[i].Time) || got[i].Src != want[i].Src || !fieldsEqual(got[i].Fields, want[i].Fields) {
				t.Errorf("%s: packet %d: %v %s %v, want %v %s %v", name, i, got[i].Time, got[i].Src, got[i].Fields,
					want[i].Time, want[i].Src, want[i].Fields)
			}
		}
	}
	// Truncated files are errors, not a silently shorter capture.
	for _, n := range []int{10, 30, len(ref.Bytes()) - 5} {
		if _, _, err := Decode(bytes.NewReader(ref.Bytes()[:n]), wire.DefaultPort); !errors.Is(err, ErrFormat) {
			t.Errorf("pcap cut at %d: %v, want ErrFormat", n, err)
		}
	}
}

func fieldsEqual(a, b Fields) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzReader: whatever the bytes, the reader returns records or an error,
// never panics, never returns a record longer than maxRecord; and the
// records it reads, written again, read back the same (round trip).
func FuzzReader(f *testing.F) {
	_, frames := storyFrames(f)
	var ref bytes.Buffer
	w, _ := NewWriter(&ref)
	// Small seeds: the fuzzer minimises every new input, and a long one
	// holds it up for seconds.
	for i, fr := range frames[:2] {
		w.WritePacket(time.Unix(int64(i), 0), fr)
	}
	f.Add(ref.Bytes())
	f.Add(pcapng(frames[:1], time.Unix(5, 0)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		var recs []Record
		for len(recs) < 1000 {
			rec, err := r.Next()
			if err != nil {
				break
			}
			if len(rec.Data) > maxRecord {
				t.Fatalf("record of %d bytes", len(rec.Data))
			}
			rec.Data = bytes.Clone(rec.Data)
			recs = append(recs, rec)
		}
		var again bytes.Buffer
		w, _ := NewWriter(&again)
		for _, rec := range recs {
			if err := w.WritePacket(rec.Time, rec.Data); err != nil {
				t.Fatal(err)
			}
		}
		r2, err := NewReader(&again)
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs {
			got, err := r2.Next()
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			// pcap keeps 32-bit seconds: compare what it can hold.
			if !bytes.Equal(got.Data, rec.Data) || got.Time.Nanosecond() != rec.Time.Nanosecond() ||
				uint32(got.Time.Unix()) != uint32(rec.Time.Unix()) {
				t.Fatalf("record %d: round trip changed it", i)
			}
		}
		// Decoding the file must not fail or panic either way.
		Decode(bytes.NewReader(b), wire.DefaultPort)
	})
}

// FuzzDissect: any UDP payload dissects without panicking; the verdict is
// wire.Parse's; every field is one FieldNames lists (so tshark is asked
// for it); the CRC status is right; and a valid packet's fields are
// those of its re-encoding through wire's codecs (round trip).
func FuzzDissect(f *testing.F) {
	for _, v := range readSpecVectors(f) {
		f.Add(v.pkt)
	}
	known := map[string]bool{}
	for _, n := range FieldNames {
		known[n] = true
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, drop := Dissect(b)
		_, err := wire.Parse(b)
		if (err == nil) != (drop == "") {
			t.Fatalf("drop %q, wire.Parse %v", drop, err)
		}
		for _, x := range fs {
			if !known[x.Name] {
				t.Fatalf("field %s not in FieldNames", x.Name)
			}
		}
		if len(b) >= 12 {
			ok := binary.BigEndian.Uint32(b[len(b)-4:]) == wire.Checksum(b[:len(b)-4])
			if (fs.Get("metaroce.crc.status") == "1") != ok {
				t.Fatalf("crc status %q, crc ok %v", fs.Get("metaroce.crc.status"), ok)
			}
		}
		if err != nil {
			return
		}
		re := reencode(t, b)
		if !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs")
		}
		fs2, _ := Dissect(re)
		if !fieldsEqual(fs, fs2) {
			t.Fatalf("fields of the re-encoding differ")
		}
	})
}

// reencode decodes a valid packet with wire's Decode methods and encodes
// it again with the Append functions.
func reencode(t *testing.T, b []byte) []byte {
	p, err := wire.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	switch p.Class {
	case wire.ClassData:
		var h wire.DataHeader
		h.Decode(p.Data())
		return wire.AppendData(nil, &h, p.Data().Payload())
	case wire.ClassAck:
		var h wire.AckHeader
		h.Decode(p.Ack())
		return wire.AppendAck(nil, &h)
	case wire.ClassNack:
		var h wire.NackHeader
		h.Decode(p.Nack())
		return wire.AppendNack(nil, &h)
	default:
		var h wire.ConnHeader
		h.Decode(p.Conn())
		return wire.AppendConn(nil, &h)
	}
}
