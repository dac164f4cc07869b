package testnet

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCapture: a capture of the switch port of host 0 holds both
// directions of a ping between the hosts, once Stop has returned; a
// second Stop reports the same; an interface that does not exist is an
// error that says so.
func TestCapture(t *testing.T) {
	s := NewStar(t, 2, Config{})
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatal(ErrNoTcpdump)
	}
	dir := t.TempDir()
	cs, err := CaptureAll(dir, "t-", s.Switch.Ports[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Stop() })
	for range 3 {
		if err := s.Hosts[0].Ping(s.Hosts[1].IPv4, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := cs.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if p := cs.Paths()[0]; filepath.Dir(p) != dir || filepath.Base(p) != "t-sw-h0.pcap" {
		t.Errorf("capture file %s", p)
	}
	b, err := os.ReadFile(cs.Paths()[0])
	if err != nil {
		t.Fatal(err)
	}
	req, rep := icmpEchoes(t, b)
	if req < 3 || rep < 3 {
		t.Fatalf("capture holds %d echo requests and %d replies, want 3 each", req, rep)
	}
	if _, err := s.Hosts[0].StartCapture("nosuchif0", filepath.Join(dir, "bad.pcap")); err == nil || !strings.Contains(err.Error(), "nosuchif0") {
		t.Errorf("capture of a missing interface: %v", err)
	}
}

// icmpEchoes counts the ICMPv4 echo requests and replies of an Ethernet
// pcap file (classic format, as tcpdump -w writes it).
func icmpEchoes(t *testing.T, b []byte) (req, rep int) {
	t.Helper()
	if len(b) < 24 {
		t.Fatalf("pcap of %d bytes", len(b))
	}
	bo := binary.ByteOrder(binary.LittleEndian)
	if binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 && binary.LittleEndian.Uint32(b) != 0xa1b23c4d {
		bo = binary.BigEndian
	}
	if bo.Uint32(b[20:]) != 1 {
		t.Fatalf("link type %d, want Ethernet", bo.Uint32(b[20:]))
	}
	r := bytes.NewReader(b[24:])
	for {
		var h [16]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return req, rep
		}
		pkt := make([]byte, bo.Uint32(h[8:]))
		if _, err := io.ReadFull(r, pkt); err != nil {
			t.Fatal("truncated pcap")
		}
		// Ethernet (14), IPv4 without options (20), ICMP type.
		if len(pkt) >= 35 && binary.BigEndian.Uint16(pkt[12:]) == 0x0800 && pkt[23] == 1 {
			switch pkt[34] {
			case 8:
				req++
			case 0:
				rep++
			}
		}
	}
}
