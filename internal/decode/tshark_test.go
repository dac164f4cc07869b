package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/wire"
)

// The dissector under test, relative to this package.
var dissector = filepath.Join("..", "..", "deploy", "wireshark", "metaroce.lua")

// needTshark skips without root (the CI runs as root, and the live
// capture needs it) and fails, naming the package, without tshark.
func needTshark(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, captures); run as root")
	}
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Fatal("tshark not found: install the Debian package tshark (make deps)")
	}
}

// installedDissector returns the metaroce.lua in a Lua plugin folder tshark
// loads at start (make install puts one there), or "".
func installedDissector(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command("tshark", "-G", "folders")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark -G folders: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, dir, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(k, "Lua Plugins") {
			continue
		}
		f := filepath.Join(strings.TrimSpace(dir), "metaroce.lua")
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return ""
}

// dissectorArgs loads the repository's dissector with -X, unless tshark
// already loads an installed copy, which must then be the same file (a
// second registration of the protocol would fail, and an older copy
// would be tested instead of this one).
func dissectorArgs(t *testing.T) []string {
	t.Helper()
	inst := installedDissector(t)
	if inst == "" {
		return []string{"-X", "lua_script:" + dissector}
	}
	a, err1 := os.ReadFile(inst)
	b, err2 := os.ReadFile(dissector)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Fatalf("%s, which tshark loads at start, differs from %s: run make install-wireshark, or remove it", inst, dissector)
	}
	return nil
}

// tsharkFields are the fields asked of tshark: every field decode
// produces, and tshark's own markers of malformed packets and expert
// info.
var tsharkFields = append([]string{"frame.number", "_ws.malformed", "_ws.expert.group", "_ws.expert.severity", "_ws.expert.message"}, FieldNames...)

// tshark runs tshark with the dissector over file and returns one map of
// field to value per frame, fields missing from a frame as "".
func tshark(t *testing.T, file string, extra ...string) []map[string]string {
	t.Helper()
	args := append(dissectorArgs(t), "-r", file, "-T", "fields",
		"-E", "occurrence=a", "-E", "aggregator=,", "-E", "separator=/t", "-E", "quote=n")
	args = append(args, extra...)
	for _, f := range tsharkFields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command("tshark", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	// tshark reports a Lua error on stderr and goes on without the
	// dissector: that is a failure here.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if line != "" && !strings.Contains(line, "Running as user") {
			t.Fatalf("tshark stderr: %s", stderr.String())
		}
	}
	var rows []map[string]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != len(tsharkFields) {
			t.Fatalf("tshark printed %d columns, want %d: %q", len(cols), len(tsharkFields), line)
		}
		row := map[string]string{}
		for i, f := range tsharkFields {
			row[f] = cols[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// sameValue compares a field as tshark prints it with decode's text:
// integers by value (so 0x0005 and 5 agree), the rest exactly.
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	as, bs := strings.Split(a, ","), strings.Split(b, ",")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		x, err1 := strconv.ParseUint(as[i], 0, 64)
		y, err2 := strconv.ParseUint(bs[i], 0, 64)
		if err1 != nil || err2 != nil || x != y {
			return false
		}
	}
	return true
}

// compareAll requires tshark and decode to agree on every field of every
// MetaRoCE packet of file, and tshark to find no packet decode does not.
func compareAll(t *testing.T, file string) ([]map[string]string, []*Packet) {
	t.Helper()
	rows := tshark(t, file)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, pkts, err := Decode(f, wire.DefaultPort)
	if err != nil {
		t.Fatal(err)
	}
	byFrame := map[int]*Packet{}
	for _, p := range pkts {
		byFrame[p.Frame] = p
	}
	seen, bad := 0, 0
	for _, row := range rows {
		n, _ := strconv.Atoi(row["frame.number"])
		p := byFrame[n]
		if p == nil {
			if row["metaroce.crc"] != "" || row["metaroce.drop"] != "" {
				t.Errorf("frame %d: tshark dissects MetaRoCE, decode finds none", n)
			}
			continue
		}
		seen++
		for _, name := range FieldNames {
			if got, want := row[name], p.Fields.Get(name); !sameValue(got, want) {
				bad++
				if bad <= 20 {
					t.Errorf("frame %d %s: %s: tshark %q, decode %q", n, p.Opcode, name, got, want)
				}
			}
		}
	}
	if seen != len(pkts) {
		t.Errorf("tshark printed %d of decode's %d MetaRoCE frames", seen, len(pkts))
	}
	return rows, pkts
}

// TestTsharkVectors: every packet vector of docs/spec.md §12.3, framed as
// §2.1 says (IPv4 as §12.5 shows, IPv6, and IPv4 with an 802.1Q tag),
// through the dissector: each listed field is what tshark prints, CRCs
// verify, nothing is malformed, and decode agrees.
func TestTsharkVectors(t *testing.T) {
	needTshark(t)
	vs := readSpecVectors(t)
	var frames [][]byte
	for _, v := range vs {
		frames = append(frames, frameOf(t, v.pkt, specA))
	}
	for _, v := range vs {
		frames = append(frames, frameOf(t, v.pkt, specA6))
	}
	for _, v := range vs {
		frames = append(frames, withVLAN(frameOf(t, v.pkt, specA)))
	}
	file := writePcap(t, t.TempDir(), "vectors.pcap", frames)
	rows, pkts := compareAll(t, file)
	if len(rows) != len(frames) || len(pkts) != len(frames) {
		t.Fatalf("tshark printed %d frames, decode %d packets, want %d", len(rows), len(pkts), len(frames))
	}
	for i := range rows {
		v, row := vs[i%len(vs)], rows[i]
		for _, k := range v.keys {
			name, want := vectorField(t, v, k)
			if name == "" {
				continue
			}
			if got := row[name]; !sameValue(got, want) {
				t.Errorf("vector %s: %s: tshark %q, spec %q", v.name, name, got, want)
			}
		}
		if row["metaroce.crc.status"] != "1" || row["metaroce.drop"] != "" || row["_ws.malformed"] != "" {
			t.Errorf("vector %s: crc status %q, drop %q, malformed %q", v.name, row["metaroce.crc.status"], row["metaroce.drop"], row["_ws.malformed"])
		}
		if strings.Contains(row["_ws.expert.group"], malformedGroup) || strings.Contains(row["_ws.expert.group"], checksumGroup) {
			t.Errorf("vector %s: expert info %q: %s", v.name, row["_ws.expert.group"], row["_ws.expert.message"])
		}
	}
}

// Wireshark's expert groups (epan/proto.h) as tshark prints them.
const (
	checksumGroup  = "16777216"  // PI_CHECKSUM, 0x01000000
	malformedGroup = "117440512" // PI_MALFORMED, 0x07000000
)

// TestTsharkFlagsBadPackets: a packet with one bit flipped in its payload
// is flagged with a bad CRC32C (status, computed value, expert info), and
// packets a receiver drops for another reason carry that reason; decode
// says the same of each.
func TestTsharkFlagsBadPackets(t *testing.T) {
	needTshark(t)
	vs := readSpecVectors(t)
	byName := map[string][]byte{}
	for _, v := range vs {
		byName[v.name] = v.pkt
	}
	cases := []struct {
		name string
		pkt  []byte
		drop string
	}{
		{"corrupt payload", flip(byName["write"], 66), "crc"},
		{"corrupt crc", flip(byName["ack"], 82), "crc"},
		{"version 2", resealed(byName["connect"], func(b []byte) { b[0] = 2 }), "version"},
		{"undefined opcode", resealed(byName["nack-rnr"], func(b []byte) { b[1] = 0x12 }), "opcode"},
		{"short", byName["ack"][:40], "short"},
		{"reserved flag", resealed(byName["ack"], func(b []byte) { b[3] = 0x08 }), "reserved"},
		{"payload length", resealed(byName["write"], func(b []byte) { b[37] = 9 }), "length"},
		{"sack bit 0", resealed(byName["ack"], func(b []byte) { b[40] &^= 1 }), "field"},
		{"nack reason 0", resealed(byName["nack-rnr"], func(b []byte) { b[14] = 0 }), "field"},
		{"connect window", resealed(byName["connect"], func(b []byte) { b[22] = 3 }), "field"},
		{"probe with psn", resealed(byName["probe"], func(b []byte) { b[11] = 1 }), "field"},
		{"send reserved", resealed(byName["send"], func(b []byte) { b[55] = 1 }), "reserved"},
	}
	var frames [][]byte
	for _, c := range cases {
		frames = append(frames, frameOf(t, c.pkt, specA))
	}
	file := writePcap(t, t.TempDir(), "bad.pcap", frames)
	rows, pkts := compareAll(t, file)
	if len(rows) != len(cases) || len(pkts) != len(cases) {
		t.Fatalf("tshark %d frames, decode %d packets, want %d", len(rows), len(pkts), len(cases))
	}
	for i, c := range cases {
		row := rows[i]
		if got := row["metaroce.drop"]; got != c.drop {
			t.Errorf("%s: tshark drop %q, want %q", c.name, got, c.drop)
		}
		if pkts[i].Drop != c.drop {
			t.Errorf("%s: decode drop %q, want %q", c.name, pkts[i].Drop, c.drop)
		}
		if !strings.Contains(row["_ws.expert.group"], malformedGroup) {
			t.Errorf("%s: no malformed expert info (groups %q)", c.name, row["_ws.expert.group"])
		}
		if c.drop == "crc" {
			if row["metaroce.crc.status"] != "0" || row["metaroce.crc.computed"] == "" ||
				!strings.Contains(row["_ws.expert.group"], checksumGroup) {
				t.Errorf("%s: crc status %q computed %q expert %q", c.name, row["metaroce.crc.status"],
					row["metaroce.crc.computed"], row["_ws.expert.group"])
			}
		} else if row["metaroce.crc.status"] != "1" && c.drop != "short" {
			t.Errorf("%s: resealed packet's crc status %q", c.name, row["metaroce.crc.status"])
		}
	}
	// With the preference off, no CRC is computed: unverified, not bad.
	rows = tshark(t, file, "-o", "metaroce.check_crc:FALSE")
	if r := rows[0]; r["metaroce.crc.status"] != "2" || r["metaroce.drop"] != "" || r["metaroce.crc"] == "" {
		t.Errorf("check_crc off, corrupt payload: crc %q status %q drop %q", r["metaroce.crc"], r["metaroce.crc.status"], r["metaroce.drop"])
	}
}

// TestTsharkPortPreference: the preference moves the dissector to another
// port (4792 stays registered).
func TestTsharkPortPreference(t *testing.T) {
	needTshark(t)
	vs := readSpecVectors(t)
	ep := specA
	ep.DstPort = 7000
	file := writePcap(t, t.TempDir(), "port.pcap", [][]byte{frameOf(t, vs[0].pkt, ep), frameOf(t, vs[0].pkt, specA)})
	rows := tshark(t, file)
	if rows[0]["metaroce.opcode"] != "" || rows[1]["metaroce.opcode"] == "" {
		t.Fatalf("without the preference: %q %q", rows[0]["metaroce.opcode"], rows[1]["metaroce.opcode"])
	}
	rows = tshark(t, file, "-o", "metaroce.port:7000")
	if rows[0]["metaroce.opcode"] != "0x20" || rows[1]["metaroce.opcode"] != "0x20" {
		t.Fatalf("with -o metaroce.port:7000: %q %q", rows[0]["metaroce.opcode"], rows[1]["metaroce.opcode"])
	}
	// The same capture converted to pcapng by tshark reads the same.
	ng := filepath.Join(t.TempDir(), "port.pcapng")
	if out, err := exec.Command("tshark", "-r", file, "-F", "pcapng", "-w", ng).CombinedOutput(); err != nil {
		t.Fatalf("tshark -F pcapng: %v: %s", err, out)
	}
	compareAll(t, ng)
}

// flip returns pkt with one bit of byte i flipped.
func flip(pkt []byte, i int) []byte {
	b := bytes.Clone(pkt)
	b[i] ^= 0x10
	return b
}

// resealed returns pkt changed by f with its CRC recomputed, so only the
// change is wrong.
func resealed(pkt []byte, f func([]byte)) []byte {
	b := bytes.Clone(pkt)
	f(b)
	if len(b) >= 12 {
		wire.Seal(b)
	}
	return b
}

// TestTsharkLossyCapture is the acceptance test on real traffic: two
// metaroced daemons (AF_XDP, 16 paths) through a switch dropping 3% of the
// packets it forwards, a connection, WRITEs, a READ and SENDs, and a
// teardown, captured on the switch port of the initiator (and on the
// initiator's own interface, which shows none of it). tshark and
// decode agree on every field of every packet; tshark finds nothing
// malformed and every CRC good; the capture holds the handshake,
// retransmissions and the loss that decode's summary reports.
func TestTsharkLossyCapture(t *testing.T) {
	needTshark(t)
	s := testnet.NewStar(t, 2, testnet.Config{})
	dir := t.TempDir()
	caps, err := testnet.CaptureAll(dir, "", s.Switch.Ports[0], s.Hosts[0].Port)
	if errors.Is(err, testnet.ErrNoTcpdump) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caps.Stop() })
	if err := s.Switch.SetLoss(0.03); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sockA := startDaemon(t, ctx, s.Hosts[0])
	sockB := startDaemon(t, ctx, s.Hosts[1])
	traffic(t, ctx, sockA, sockB, s.Hosts[1])
	// Stop capturing before the daemons: once A's detaches its XDP
	// program, a late packet from B would reach A's kernel and its capture.
	if err := caps.Stop(); err != nil {
		t.Fatal(err)
	}
	cancel()
	file := caps.Paths()[0]
	// What docs/operate.md says of AF_XDP: a capture on the host's own
	// interface sees none of its MetaRoCE packets, received (the XDP
	// program redirects them to the socket before any tap) or sent
	// (AF_XDP transmit bypasses the taps).
	hf, err := os.Open(caps.Paths()[1])
	if err != nil {
		t.Fatal(err)
	}
	hs, _, err := Decode(hf, wire.DefaultPort)
	hf.Close()
	if err != nil {
		t.Fatal(err)
	}
	if hs.Packets != 0 {
		t.Errorf("the capture on host A's AF_XDP interface holds %d MetaRoCE packets; docs/operate.md says none", hs.Packets)
	}
	rows, pkts := compareAll(t, file)
	if len(pkts) < 100 {
		t.Fatalf("%d MetaRoCE packets captured", len(pkts))
	}
	// Spec §2.4 as the wire shows it: data and probes in DSCP 26,
	// everything else in 48, all ECT(0) (ECN 2; the switch does not mark).
	for _, p := range pkts {
		want := uint8(48)
		if wire.Opcode(p.b[1]).Class() == wire.ClassData {
			want = 26
		}
		if p.DSCP != want || p.ECN != 2 {
			t.Errorf("frame %d %s: DSCP %d ECN %d, want %d and 2 (spec §2.4)", p.Frame, p.Opcode, p.DSCP, p.ECN, want)
			break
		}
	}
	var retx int
	for _, row := range rows {
		if row["metaroce.crc"] == "" {
			continue // ARP, ICMPv6
		}
		if row["_ws.malformed"] != "" || row["metaroce.drop"] != "" || row["metaroce.crc.status"] != "1" ||
			strings.Contains(row["_ws.expert.group"], malformedGroup) {
			t.Errorf("frame %s: malformed %q drop %q crc %q expert %q", row["frame.number"], row["_ws.malformed"],
				row["metaroce.drop"], row["metaroce.crc.status"], row["_ws.expert.message"])
		}
		if row["metaroce.retx"] == "1" {
			retx++
		}
	}
	f, _ := os.Open(file)
	defer f.Close()
	sum, _, err := Decode(f, wire.DefaultPort)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	writeText(&buf, sum, nil, false)
	t.Logf("tshark: %d frames, %d retransmissions; decode:\n%s", len(rows), retx, buf.String())
	if retx == 0 {
		t.Error("3% loss and no retransmission in the capture")
	}
	checkSummary(t, sum)
	if dst := os.Getenv("METAROCE_KEEP_PCAP"); dst != "" {
		b, _ := os.ReadFile(file)
		os.WriteFile(dst, b, 0o644)
	}
}

// checkSummary: the lossy capture's summary shows one connection with its
// handshake and teardown, many entropy values, retransmissions and loss.
func checkSummary(t *testing.T, s *Summary) {
	t.Helper()
	var c *ConnSummary
	for _, x := range s.Connections {
		if x.B != "?" && len(x.Directions) == 2 {
			c = x
		}
	}
	if c == nil {
		t.Fatalf("no connection with both ends and both directions in %d", len(s.Connections))
	}
	var ops []string
	for _, e := range c.Handshake {
		ops = append(ops, e.Opcode)
	}
	seq := strings.Join(ops, " ")
	for _, want := range []string{"CONNECT", "CHALLENGE", "ACCEPT", "DISCONNECT"} {
		if !strings.Contains(seq, want) {
			t.Errorf("timeline %q lacks %s", seq, want)
		}
	}
	a := c.Directions[0]
	if a.From != c.A {
		a = c.Directions[1]
	}
	if a.DataEntropy < 4 {
		t.Errorf("A's data used %d entropy values, want several (16 paths)", a.DataEntropy)
	}
	if a.Retransmits == 0 {
		t.Error("A retransmitted nothing")
	}
	if a.Nacks["RNR"] == 0 || a.Nacks["REMOTE_ACCESS"] == 0 {
		t.Errorf("NACKs A received: %v, want RNR and REMOTE_ACCESS", a.Nacks)
	}
	lost := 0
	for _, p := range a.Paths {
		lost += p.Lost
	}
	if lost == 0 {
		t.Error("the switch dropped 3% of A's packets after the capture point, and no ack says so")
	}
	if a.RTT == nil || a.RTT.Samples == 0 {
		t.Error("no RTT samples for A's data")
	}
}

// startDaemon runs metaroced (AF_XDP, queue 0) in h's namespace until ctx
// ends and returns its control socket.
func startDaemon(t *testing.T, ctx context.Context, h *testnet.Host) string {
	t.Helper()
	cfg := config.Defaults()
	ic := config.DefaultInterface(h.Port.Name)
	ic.Backend = config.BackendAFXDP
	ic.Queues = []int{0}
	cfg.Interfaces = []config.Interface{ic}
	cfg.ControlSocket = filepath.Join(t.TempDir(), "control.sock")
	cfg.MetricsAddress = ""
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan error, 1)
	if err := h.Go(func() { done <- daemon.Run(ctx, &cfg, log, daemon.Options{CPU: -1}) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon in %s: %v", h.Name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("daemon in %s did not stop", h.Name)
		}
	})
	c, err := daemon.Dial(cfg.ControlSocket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return cfg.ControlSocket
}

// traffic connects a queue pair on A to one on B, moves WRITEs, a READ and
// SENDs (two of them early, drawing NACK RNR), a WRITE with a bad key
// (NACK REMOTE_ACCESS and a void packet), and destroys both (DISCONNECT).
func traffic(t *testing.T, ctx context.Context, sockA, sockB string, b *testnet.Host) {
	t.Helper()
	ca, cb := apptest.Dial(t, sockA), apptest.Dial(t, sockB)
	const size, n = 16384, 64
	src := apptest.Region(t, ca, n*size, client.LocalWrite)
	dst := apptest.Region(t, cb, n*size, client.LocalWrite|client.RemoteWrite|client.RemoteRead)
	recv := apptest.Region(t, cb, 4*size, client.LocalWrite)
	qa, err := ca.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := cb.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	acc := make(chan error, 1)
	go func() { _, err := qb.Accept(cctx); acc <- err }()
	if err := qa.Connect(cctx, b.IPv4, qb.Num, qb.Token); err != nil {
		t.Fatalf("connect: %v", err)
	}
	if err := <-acc; err != nil {
		t.Fatalf("accept: %v", err)
	}
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 7)
	}
	for i := range 4 {
		if err := qb.PostRecv(uint64(100+i), recv, i*size, size); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(q *client.QP, want int) {
		var cq [16]client.Completion
		for got := 0; got < want; {
			k, err := q.WaitCQ(cctx, cq[:])
			if err != nil {
				t.Fatalf("%d of %d completions: %v", got, want, err)
			}
			for _, c := range cq[:k] {
				if err := c.Err(); err != nil {
					t.Fatalf("completion %d: %v", c.WRID, err)
				}
			}
			got += k
		}
	}
	for i := range n {
		if err := qa.PostWrite(uint64(i), src, i*size, size, dst.Addr+uint64(i*size), dst.Key); err != nil {
			t.Fatal(err)
		}
		if i%8 == 7 {
			wait(qa, 8)
		}
	}
	if err := qa.PostRead(1000, src, 0, size, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	wait(qa, 1)
	for i := range 4 {
		if err := qa.PostSend(uint64(2000+i), src, i*size, size); err != nil {
			t.Fatal(err)
		}
	}
	wait(qa, 4)
	wait(qb, 4)
	if !bytes.Equal(dst.Bytes(), src.Bytes()) {
		t.Fatal("B's region differs from what A wrote")
	}
	// Two SENDs before B posts their buffers: NACK RNR until it does.
	for i := range 2 {
		if err := qa.PostSend(uint64(3000+i), src, i*size, 1000); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Millisecond)
	for i := range 2 {
		if err := qb.PostRecv(uint64(200+i), recv, i*size, size); err != nil {
			t.Fatal(err)
		}
	}
	wait(qa, 2)
	wait(qb, 2)
	// A WRITE with a key B does not know: NACK REMOTE_ACCESS, the message
	// fails, and A voids its PSN (spec §6.3).
	if err := qa.PostWrite(4000, src, 0, 4096, dst.Addr, dst.Key^0x5a5a5a5a); err != nil {
		t.Fatal(err)
	}
	var cq [1]client.Completion
	if k, err := qa.WaitCQ(cctx, cq[:]); err != nil || k != 1 || !errors.Is(cq[0].Err(), client.ErrRemoteAccess) {
		t.Fatalf("WRITE with a bad key: %d completions, %v, %v; want a remote access error", k, err, cq[0].Err())
	}
	if err := qa.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := qb.Destroy(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // DISCONNECT_ACK
}

// TestInstallWireshark: deploy/wireshark/install.sh (make install's
// install-wireshark) puts the dissector where tshark loads it without
// -X: here the personal plugin folder of a scratch HOME.
func TestInstallWireshark(t *testing.T) {
	needTshark(t)
	home := t.TempDir()
	plugins := filepath.Join(home, ".local", "lib", "wireshark", "plugins")
	cmd := exec.Command(filepath.Join("..", "..", "deploy", "wireshark", "install.sh"))
	cmd.Env = append(os.Environ(), "WIRESHARK_PLUGIN_DIR="+plugins, "DESTDIR=", "DATADIR="+filepath.Join(home, "share"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install.sh: %v: %s", err, out)
	}
	for _, f := range []string{filepath.Join(plugins, "metaroce.lua"), filepath.Join(home, "share", "metaroced", "wireshark", "metaroce.lua")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	if inst := installedDissector(t); inst != "" {
		// A second copy in the personal folder would register the
		// protocol twice; the installed one is held to the repository's
		// by dissectorArgs.
		t.Logf("tshark already loads %s (make install): not loading a second copy", inst)
		return
	}
	vs := readSpecVectors(t)
	file := writePcap(t, t.TempDir(), "one.pcap", [][]byte{frameOf(t, vs[0].pkt, specA)})
	tc := exec.Command("tshark", "-r", file, "-T", "fields", "-e", "metaroce.src_conn")
	tc.Env = append(os.Environ(), "HOME="+home)
	out, err := tc.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "0x1c2d3e4f" {
		t.Fatalf("tshark with the installed plugin: src_conn %q", got)
	}
}

// TestTsharkTruncated: a capture with a snap length that cuts the packets
// after the data header shows the header, marks the CRC unverified (not
// bad, not malformed); decode skips such records and counts them.
func TestTsharkTruncated(t *testing.T) {
	needTshark(t)
	_, frames := storyFrames(t)
	// Headers and the largest fixed header (conn, 84 bytes): data packets
	// are cut inside their payload, conn packets with private data inside it.
	const snap = 42 + wire.ConnLen + 4
	var b bytes.Buffer
	w, _ := NewWriter(&b)
	full := len(frames)
	for i, f := range frames {
		w.WritePacket(time.Unix(int64(i), 0), f)
	}
	// The same frames again, cut at snap (incl_len < orig_len).
	for i, f := range frames {
		var h [16]byte
		n := min(len(f), snap)
		binary.LittleEndian.PutUint32(h[0:], uint32(100+i))
		binary.LittleEndian.PutUint32(h[8:], uint32(n))
		binary.LittleEndian.PutUint32(h[12:], uint32(len(f)))
		b.Write(h[:])
		b.Write(f[:n])
	}
	file := filepath.Join(t.TempDir(), "snap.pcap")
	os.WriteFile(file, b.Bytes(), 0o644)
	rows := tshark(t, file)
	for i, f := range frames {
		whole, cut := rows[i], rows[full+i]
		if len(f) <= snap {
			continue
		}
		if cut["metaroce.crc.status"] != "2" || cut["_ws.malformed"] != "" || cut["metaroce.drop"] != "" ||
			strings.Contains(cut["_ws.expert.group"], malformedGroup) {
			t.Errorf("frame %d cut at %d: crc %q malformed %q drop %q expert %q", i, snap, cut["metaroce.crc.status"],
				cut["_ws.malformed"], cut["metaroce.drop"], cut["_ws.expert.message"])
		}
		for _, name := range []string{"metaroce.opcode", "metaroce.dst_conn", "metaroce.psn", "metaroce.path_seq", "metaroce.src_conn"} {
			if cut[name] != whole[name] {
				t.Errorf("frame %d cut: %s %q, whole %q", i, name, cut[name], whole[name])
			}
		}
	}
	s, pkts, err := Decode(bytes.NewReader(b.Bytes()), wire.DefaultPort)
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	for _, f := range frames {
		if len(f) > snap {
			cut++
		}
	}
	if s.Truncated != cut || len(pkts) != 2*full-cut {
		t.Errorf("decode: %d truncated, %d packets; want %d, %d", s.Truncated, len(pkts), cut, 2*full-cut)
	}
}
