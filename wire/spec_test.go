package wire_test

// This file keeps docs/spec.md honest. The test vectors of §12 are generated
// from specVectors below with
//
//	go test ./wire -run TestSpecVectors -update
//
// and every run reads them back from the document, as an independent
// implementation would: Parse must accept each hex dump, the decoded fields
// must equal the listed ones, and encoding the listed fields must give the
// same bytes. TestSpecTables checks the code-point tables of §3.2, §3.3,
// §6.2 and §7.5 against the constants of this package.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/wire"
	"github.com/metaroce/metaroce/wire/frame"
)

var updateSpec = flag.Bool("update", false, "regenerate the test vectors in docs/spec.md §12 from specVectors")

const (
	specPath    = "../docs/spec.md"
	vectorBegin = "<!-- BEGIN GENERATED VECTORS (go test ./wire -run TestSpecVectors -update); do not edit by hand -->"
	vectorEnd   = "<!-- END GENERATED VECTORS -->"
)

// The story the vectors tell: initiator A (10.0.0.1, connection id specConnA)
// connects to listener B (10.0.0.2, specConnB) for service 1, writes, sends and
// reads, and closes. Values are fixed so that the dumps never change unless
// the format does.
const (
	specConnA  = 0x1c2d3e4f
	specConnB  = 0x8a3f19c2
	specPSNA   = 0x9e3779b9 // A's initial PSN
	specPSNB   = 0x0badf00d // B's initial PSN
	specRKeyB  = 0x5eed1234
	specAddrB  = 0x00007f0012340000
	specTSA    = 1_000_000_000 // A's clock, ns
	specTSB    = 5_200_000_000 // B's clock, ns
	specIssueT = 5             // B's clock in seconds when it issued the cookie
	// specToken is service 1's token, which B issued to its application
	// and A's application got out of band (§7.3).
	specToken = 0x5ca1ab1e0ddba11
)

// specCookieSecret is the listener's HMAC key in the §12.4 example.
var specCookieSecret = func() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

var specCookiePeer = netip.MustParseAddr("10.0.0.1")

// specSecretA is A's endpoint secret in the §12.4 reset-token example
// (B's is specCookieSecret): the 32 bytes 0x20..0x3f.
var specSecretA = func() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(0x20 + i)
	}
	return b
}()

// specResetToken computes the §7.6 reset token: the first 16 bytes of
// HMAC-SHA256(secret, "RST" | connection id), the id big-endian.
func specResetToken(secret []byte, id uint32) (input []byte, tok [wire.ResetTokenLen]byte) {
	input = append([]byte("RST"), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(input[3:], id)
	m := hmac.New(sha256.New, secret)
	m.Write(input)
	copy(tok[:], m.Sum(nil))
	return input, tok
}

// specResetExamples are the reset tokens the vectors carry.
var specResetExamples = []struct {
	name, who string
	secret    []byte
	id        uint32
	usedBy    string
}{
	{"reset-token-a", "A's, for its connection 0x1c2d3e4f, which A announces in its CONNECT", specSecretA, specConnA, "connect connect-cookie"},
	{"reset-token-b", "B's, for its connection 0x8a3f19c2, which B announces in its ACCEPT", specCookieSecret, specConnB, "accept"},
	{"reset-token-unknown", "B's, for the id 0x77665544 it no longer knows, which its RESET carries", specCookieSecret, 0x77665544, "reset"},
}

func specReset(secret []byte, id uint32) [wire.ResetTokenLen]byte {
	_, t := specResetToken(secret, id)
	return t
}

// specCookie computes the §7.4 cookie: the issue time in seconds, then the
// first 12 bytes of HMAC-SHA256(secret, peer address as 16 bytes | peer
// connection id | service | issue time), integers big-endian.
func specCookie(secret []byte, peer netip.Addr, src, service, t uint32) (input []byte, cookie [wire.CookieLen]byte) {
	a := peer.As16()
	input = append(input, a[:]...)
	input = binary.BigEndian.AppendUint32(input, src)
	input = binary.BigEndian.AppendUint32(input, service)
	input = binary.BigEndian.AppendUint32(input, t)
	m := hmac.New(sha256.New, secret)
	m.Write(input)
	binary.BigEndian.PutUint32(cookie[:4], t)
	copy(cookie[4:], m.Sum(nil)[:12])
	return input, cookie
}

func specExampleCookie() [wire.CookieLen]byte {
	_, c := specCookie(specCookieSecret, specCookiePeer, specConnA, 1, specIssueT)
	return c
}

type specVector struct {
	name    string // unique, stable: the compliance suite refers to it
	title   string
	note    string
	data    *wire.DataHeader
	payload []byte
	ack     *wire.AckHeader
	nack    *wire.NackHeader
	conn    *wire.ConnHeader
}

func specVectors() []specVector {
	ck := specExampleCookie()
	tokA, tokB := specReset(specSecretA, specConnA), specReset(specCookieSecret, specConnB)
	priv := func(h *wire.ConnHeader, s string) *wire.ConnHeader { h.SetPrivate([]byte(s)); return h }
	var sack [wire.SackBytes]byte
	sack[0], sack[1] = 0xfb, 0x03 // path seqs 41, 40, 38..32 arrived; 39 missing
	vs := []specVector{
		{name: "connect", title: "CONNECT without a cookie",
			note: "A's first CONNECT: no cookie yet, so the 16 cookie bytes are zero (§7.3 step 1); service 1's token, A's reset token (§12.4) and 8 bytes of private data.",
			conn: priv(&wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: specConnA, InitialPSN: specPSNA, Service: 1,
				RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Paths: 16, Timestamp: specTSA,
				Token: specToken, ResetToken: tokA}, "rank=017")},
		{name: "challenge", title: "CHALLENGE",
			note: "B's stateless answer: the cookie of §12.4, the CONNECT's timestamp echoed (§7.3 step 2).",
			conn: &wire.ConnHeader{Opcode: wire.OpChallenge, DstConn: specConnA, Service: 1, Timestamp: specTSA, Cookie: ck}},
		{name: "connect-cookie", title: "CONNECT with the cookie",
			note: "A repeats its CONNECT with the cookie echoed byte for byte (§7.3 step 3), and everything else as before.",
			conn: priv(&wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: specConnA, InitialPSN: specPSNA, Service: 1,
				RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Paths: 16, Timestamp: specTSA + 20_000, Cookie: ck,
				Token: specToken, ResetToken: tokA}, "rank=017")},
		{name: "accept", title: "ACCEPT",
			note: "B's application accepted the connection (B's id 0x8a3f19c2): B announces its own parameters, its reset token (§12.4) and the application's private data (§7.3 step 4).",
			conn: priv(&wire.ConnHeader{Opcode: wire.OpAccept, DstConn: specConnA, SrcConn: specConnB, InitialPSN: specPSNB, Service: 1,
				RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Paths: 16, Timestamp: specTSB + 30_000,
				ResetToken: tokB}, "welcome, 17")},
		{name: "reject", title: "REJECT",
			note: "A listener's answer to a CONNECT with a valid cookie (from another initiator, id 0x2e3f4051) for a service it does not offer, or offers with another token: the same packet either way (§7.3).",
			conn: &wire.ConnHeader{Opcode: wire.OpReject, DstConn: 0x2e3f4051, Reason: wire.ReasonNoService, Timestamp: specTSB + 40_000}},
		{name: "write", title: "WRITE, last packet of a message",
			note: "Bytes 6920..6927 of a 6928-byte WRITE to B's region: placed at RemoteAddr+Offset (§4.1.2); ACK_REQ because it is the last packet.",
			data: &wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq, DstConn: specConnB, PSN: specPSNA + 5,
				PathID: 5, Stream: 2, PathSeq: 41, MsgID: 17, StreamSeq: 5, Offset: 6920, MsgLen: 6928,
				Timestamp: specTSA + 123_456, RemoteAddr: specAddrB, RKey: specRKeyB},
			payload: []byte("MetaRoCE")},
		{name: "write-imm-retx", title: "WRITE_IMM, retransmitted",
			note: "A one-packet WRITE with immediate data, sent again on another path: RETX and ACK_REQ set, new PathID and PathSeq, same PSN.",
			data: &wire.DataHeader{Opcode: wire.OpWriteImm, Flags: wire.FlagAckReq | wire.FlagRetx, DstConn: specConnB, PSN: specPSNA + 6,
				PathID: 7, Stream: 2, PathSeq: 12, MsgID: 18, StreamSeq: 6, Offset: 0, MsgLen: 5,
				Timestamp: specTSA + 234_567, RemoteAddr: specAddrB + 0x10000, RKey: specRKeyB, Imm: 0xdeadbeef},
			payload: []byte("hello")},
		{name: "send", title: "SEND",
			note: "A one-packet SEND consuming B's first posted receive buffer (RecvSeq 0, §9.4).",
			data: &wire.DataHeader{Opcode: wire.OpSend, Flags: wire.FlagAckReq, DstConn: specConnB, PSN: specPSNA + 7,
				PathID: 0, Stream: 0, PathSeq: 7, MsgID: 19, StreamSeq: 0, Offset: 0, MsgLen: 12,
				Timestamp: specTSA + 345_678, RecvSeq: 0},
			payload: []byte("hello, world")},
		{name: "send-imm", title: "SEND_IMM",
			note: "The next SEND, with immediate data, consuming receive buffer 1.",
			data: &wire.DataHeader{Opcode: wire.OpSendImm, Flags: wire.FlagAckReq, DstConn: specConnB, PSN: specPSNA + 8,
				PathID: 1, Stream: 0, PathSeq: 9, MsgID: 20, StreamSeq: 1, Offset: 0, MsgLen: 4,
				Timestamp: specTSA + 456_789, RecvSeq: 1, Imm: 0x00c0ffee},
			payload: []byte("ping")},
		{name: "read-req", title: "READ_REQ",
			note: "A asks for 1392 bytes of B's region: address, key and length, no payload (§9.3).",
			data: &wire.DataHeader{Opcode: wire.OpReadReq, Flags: wire.FlagAckReq, DstConn: specConnB, PSN: specPSNA + 9,
				PathID: 2, Stream: 3, PathSeq: 10, MsgID: 21, StreamSeq: 0, Offset: 0, MsgLen: 1392,
				Timestamp: specTSA + 567_890, RemoteAddr: specAddrB, RKey: specRKeyB}},
		{name: "read-resp", title: "READ_RESP, last packet",
			note: "B's second and last response packet, in B's PSN space, echoing the request's MsgID, Stream and StreamSeq; no address or key.",
			data: &wire.DataHeader{Opcode: wire.OpReadResp, Flags: wire.FlagAckReq, DstConn: specConnA, PSN: specPSNB + 1,
				PathID: 4, Stream: 3, PathSeq: 30, MsgID: 21, StreamSeq: 0, Offset: 1384, MsgLen: 1392,
				Timestamp: specTSB + 678_901},
			payload: []byte("RDMAREAD")},
		{name: "ack", title: "ACK",
			note: "B acknowledges path 5 of A: highest path sequence 41 (the write vector), 39 missing, one CE mark since the last ack of this path.",
			ack: &wire.AckHeader{DstConn: specConnA, CumPSN: specPSNA + 3, PathID: 5, CECount: 1, PathAckSeq: 41,
				EchoPSN: specPSNA + 5, EchoTimestamp: specTSA + 123_456, Credit: 1024, Sack: sack, AckDelay: 2500}},
		{name: "ack-rate-hint", title: "ACK with a rate hint",
			note: "B, with two connections sending to it, hints each its fair share of 95% of a 100 Gb/s downlink, 47500 Mb/s (§8.9.3); otherwise as the ack vector, a later ack of the same path.",
			ack: &wire.AckHeader{DstConn: specConnA, CumPSN: specPSNA + 6, PathID: 5, PathAckSeq: 42,
				EchoPSN: specPSNA + 6, EchoTimestamp: specTSA + 130_000, RateHint: 47500, Credit: 1024, Sack: [wire.SackBytes]byte{0x03}, AckDelay: 1800}},
		{name: "nack-rnr", title: "NACK RNR",
			note: "B has no receive buffer for the send vector yet: not consumed, retry after 20 us (§6.2).",
			nack: &wire.NackHeader{DstConn: specConnA, PSN: specPSNA + 7, PathID: 0, Reason: wire.NackRNR, PathSeq: 7,
				CumPSN: specPSNA + 7, EchoTimestamp: specTSA + 345_678, Info: 20}},
		{name: "nack-remote-access", title: "NACK REMOTE_ACCESS",
			note: "B refuses the first packet of a WRITE whose key it does not know: nothing placed, the PSN not consumed (CumPSN stops at it), the message fails (§6.2, §10.3).",
			nack: &wire.NackHeader{DstConn: specConnA, PSN: specPSNA + 10, PathID: 6, Reason: wire.NackRemoteAccess, PathSeq: 3,
				CumPSN: specPSNA + 10, EchoTimestamp: specTSA + 600_000}},
		{name: "nack-unsupported-version", title: "NACK UNSUPPORTED_VERSION",
			note: "B's answer to a packet of another version on B's connection 0x8a3f19c2 from A: PathID, PathSeq and echo are zero, Info is 1 (§3.5).",
			nack: &wire.NackHeader{DstConn: specConnA, PSN: 0x00000064, Reason: wire.NackUnsupportedVersion,
				CumPSN: specPSNA + 11, Info: 1}},
		{name: "disconnect", title: "DISCONNECT",
			note: "A closes the connection (§7.7). A has received B's PSNs up to the READ's two responses, so InitialPSN carries B's next PSN: B completes whatever it sent before that as delivered, not flushed.",
			conn: &wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: specConnB, SrcConn: specConnA, InitialPSN: specPSNB + 2,
				Reason: wire.ReasonClosed, Timestamp: specTSA + 9_000_000}},
		{name: "disconnect-ack", title: "DISCONNECT_ACK",
			note: "B's answer: the DISCONNECT's ids swapped (§7.7).",
			conn: &wire.ConnHeader{Opcode: wire.OpDisconnectAck, DstConn: specConnA, SrcConn: specConnB, Timestamp: specTSB + 9_000_000}},
		{name: "reset", title: "RESET",
			note: "B received a packet for connection id 0x77665544, which names nothing there, and proves the RESET with the reset token of that id (§7.6, §12.4).",
			conn: &wire.ConnHeader{Opcode: wire.OpReset, SrcConn: 0x77665544, Reason: wire.ReasonUnknownConn, Timestamp: specTSB + 9_500_000,
				ResetToken: specReset(specCookieSecret, 0x77665544)}},
		// Appended rather than placed after nack-remote-access (and probe and
		// nack-sequence after it), so that the numbers of the vectors before
		// them stay as they were.
		{name: "write-void", title: "WRITE, void",
			note: "A abandons the PSN of the nack-remote-access vector: the refused packet's header once more on another path, with no payload and VOID, RETX and ACK_REQ set; B consumes the PSN without effect (§6.3 step 6, §8.2).",
			data: &wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagVoid | wire.FlagRetx | wire.FlagAckReq, DstConn: specConnB,
				PSN: specPSNA + 10, PathID: 8, Stream: 1, PathSeq: 4, MsgID: 22, StreamSeq: 0, Offset: 0, MsgLen: 2768,
				Timestamp: specTSA + 612_345, RemoteAddr: specAddrB + 0x20000, RKey: 0x0badc0de}},
		{name: "probe", title: "PROBE",
			note: "A tests its path 9, which it holds suspect: PathID, PathSeq and Timestamp of the transmission, ACK_REQ, every other field zero, no payload; B acks path 9 at once and touches nothing else (§4.4, §8.7.4).",
			data: &wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq, DstConn: specConnB,
				PathID: 9, PathSeq: 57, Timestamp: specTSA + 700_000}},
		{name: "nack-sequence", title: "NACK SEQUENCE",
			note: "On a connection in the rocev2 baseline mode (§8.8; the same ids, for brevity), B's go-back-N receiver expects PSN 0x9e3779c5 and gets the next one, on the connection's one path: dropped, and A is told to resume at CumPSN. Sent once for this gap (§6.2).",
			nack: &wire.NackHeader{DstConn: specConnA, PSN: specPSNA + 13, PathID: 0, Reason: wire.NackSequence, PathSeq: 13,
				CumPSN: specPSNA + 12, EchoTimestamp: specTSA + 800_000}},
		{name: "reject-app", title: "REJECT by the application",
			note: "B's application refuses a connection request (from initiator 0x2e3f4052) with its own reason 503 and private data (§7.3, §7.5).",
			conn: priv(&wire.ConnHeader{Opcode: wire.OpReject, DstConn: 0x2e3f4052, Reason: wire.ReasonApplication, AppReason: 503,
				Timestamp: specTSB + 41_000}, "busy: retry in 5 s")},
		{name: "connect-planes", title: "CONNECT from a host of four planes",
			note: "C, a host whose three further ports sit on planes 1 to 3 (10.1.0.3, 10.2.0.3, 10.3.0.3), connects from its plane-0 address: PlaneAddrs 3 and the three addresses in their IPv4-mapped form after the private data (§7.9). A single-plane CONNECT is the connect vector: PlaneAddrs 0, no bytes.",
			conn: specPlaneConnect()},
		{name: "accept-planes", title: "ACCEPT from a host of two planes",
			note: "B, with a second port on plane 1 (10.1.0.2), accepts: PlaneAddrs 1. Both ends then spray over planes 0 and 1 only; C's planes 2 and 3 are not used on this connection (§7.9).",
			conn: specPlaneAccept()},
		{name: "write-void-repair", title: "WRITE, repair void",
			note: "A forged ack had covered PSN 0x9e3779c7, which B never got. B's ack of a packet A sent after its una passed 0x9e3779c8 carries CumPSN 0x9e3779c7: a hole. A voids the PSN without its message, which it has forgotten: a WRITE with VOID, RETX and ACK_REQ, a new PathID, PathSeq and Timestamp, and every other field zero; B consumes the PSN and its CumPSN moves on (§8.10, §8.2).",
			data: &wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagVoid | wire.FlagRetx | wire.FlagAckReq, DstConn: specConnB,
				PSN: specPSNA + 14, PathID: 3, PathSeq: 90, Timestamp: specTSA + 900_000}},
	}
	for i := range vs {
		if d := vs[i].data; d != nil {
			d.PayloadLen = uint16(len(vs[i].payload))
		}
	}
	return vs
}

// specPlaneConnect is the connect-planes vector's header: the connect-
// cookie vector's fields from a third host, with three plane addresses.
func specPlaneConnect() *wire.ConnHeader {
	h := &wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: 0x3e4f5061, InitialPSN: specPSNA + 0x1000, Service: 1,
		RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Paths: 16, Timestamp: specTSA + 50_000,
		Cookie: specExampleCookie(), Token: specToken, ResetToken: specReset(specSecretA, 0x3e4f5061)}
	h.SetPrivate([]byte("rank=018"))
	h.PlaneAddrs = 3
	for i, a := range []string{"10.1.0.3", "10.2.0.3", "10.3.0.3"} {
		h.Planes[i] = netip.MustParseAddr(a).As16()
	}
	return h
}

// specPlaneAccept is the accept-planes vector's header.
func specPlaneAccept() *wire.ConnHeader {
	h := &wire.ConnHeader{Opcode: wire.OpAccept, DstConn: 0x3e4f5061, SrcConn: specConnB + 1, InitialPSN: specPSNB + 0x1000,
		Service: 1, RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Paths: 16, Timestamp: specTSB + 60_000,
		ResetToken: specReset(specCookieSecret, specConnB+1)}
	h.PlaneAddrs = 1
	h.Planes[0] = netip.MustParseAddr("10.1.0.2").As16()
	return h
}

func (v *specVector) encode() []byte {
	switch {
	case v.data != nil:
		h := *v.data
		return wire.AppendData(nil, &h, v.payload)
	case v.ack != nil:
		return wire.AppendAck(nil, v.ack)
	case v.nack != nil:
		return wire.AppendNack(nil, v.nack)
	default:
		return wire.AppendConn(nil, v.conn)
	}
}

// The frame example of §12.5: the ack vector as B sends it to A.
var specFrameExample = struct {
	name, carries string
	ep            frame.Endpoints
	dscp, ecn     uint8
}{
	name: "ack-ipv4", carries: "ack",
	ep: frame.Endpoints{
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 0x02}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 0x01},
		Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"),
		SrcPort: 50000, DstPort: wire.DefaultPort,
	},
	dscp: 48, ecn: 2,
}

func specBuildFrame(ep *frame.Endpoints, dscp, ecn uint8, payload []byte) ([]byte, error) {
	buf := make([]byte, frame.MaxHeaderLen+len(payload))
	n, err := frame.Build(buf, ep, dscp, ecn, len(payload))
	if err != nil {
		return nil, err
	}
	copy(buf[n:], payload)
	if err := frame.Finish(buf); err != nil {
		return nil, err
	}
	return buf[:n+len(payload)], nil
}

// Names of the connection reasons, as §7.5 spells them.
var specConnReasonNames = map[wire.ConnReason]string{
	wire.ReasonNone: "NONE", wire.ReasonNoService: "NO_SERVICE", wire.ReasonBadCookie: "BAD_COOKIE",
	wire.ReasonParams: "PARAMS", wire.ReasonUnknownConn: "UNKNOWN_CONN", wire.ReasonLimit: "LIMIT",
	wire.ReasonClosed: "CLOSED", wire.ReasonFailed: "FAILED", wire.ReasonApplication: "APPLICATION",
}

// specPrivate is the private data of a conn header as a vector lists it.
type specPrivate struct{ h *wire.ConnHeader }

// A specField ties a vector key to a header field; hexa selects the
// notation the generator uses (the reader accepts decimal and 0x-hex for
// any integer).
type specField struct {
	key  string
	ptr  any
	hexa bool
}

func specDataFields(h *wire.DataHeader, payload *[]byte) []specField {
	f := []specField{
		{"opcode", &h.Opcode, false}, {"flags", &h.Flags, true}, {"dst_conn", &h.DstConn, true},
		{"psn", &h.PSN, true}, {"path_id", &h.PathID, false}, {"stream", &h.Stream, false},
		{"path_seq", &h.PathSeq, false}, {"msg_id", &h.MsgID, false}, {"stream_seq", &h.StreamSeq, false},
		{"offset", &h.Offset, false}, {"msg_len", &h.MsgLen, false}, {"payload_len", &h.PayloadLen, false},
		{"timestamp", &h.Timestamp, false},
	}
	if h.Opcode.IsSend() {
		f = append(f, specField{"recv_seq", &h.RecvSeq, false})
	} else {
		f = append(f, specField{"remote_addr", &h.RemoteAddr, true})
	}
	return append(f, specField{"rkey", &h.RKey, true}, specField{"imm", &h.Imm, true}, specField{"payload", payload, true})
}

func specAckFields(op *wire.Opcode, h *wire.AckHeader) []specField {
	return []specField{
		{"opcode", op, false}, {"flags", &h.Flags, true}, {"dst_conn", &h.DstConn, true},
		{"cum_psn", &h.CumPSN, true}, {"path_id", &h.PathID, false}, {"ce_count", &h.CECount, false},
		{"path_ack_seq", &h.PathAckSeq, false}, {"echo_psn", &h.EchoPSN, true},
		{"echo_timestamp", &h.EchoTimestamp, false}, {"rate_hint", &h.RateHint, false},
		{"credit", &h.Credit, false}, {"sack", &h.Sack, true}, {"ack_delay", &h.AckDelay, false},
	}
}

func specNackFields(op *wire.Opcode, h *wire.NackHeader) []specField {
	return []specField{
		{"opcode", op, false}, {"flags", &h.Flags, true}, {"dst_conn", &h.DstConn, true},
		{"psn", &h.PSN, true}, {"path_id", &h.PathID, false}, {"reason", &h.Reason, false},
		{"path_seq", &h.PathSeq, false}, {"cum_psn", &h.CumPSN, true},
		{"echo_timestamp", &h.EchoTimestamp, false}, {"info", &h.Info, false},
	}
}

func specConnFields(h *wire.ConnHeader) []specField {
	f := []specField{
		{"opcode", &h.Opcode, false}, {"flags", &h.Flags, true}, {"dst_conn", &h.DstConn, true},
		{"src_conn", &h.SrcConn, true}, {"initial_psn", &h.InitialPSN, true}, {"service", &h.Service, false},
		{"recv_window", &h.RecvWindow, false}, {"max_payload", &h.MaxPayload, false},
		{"msg_window", &h.MsgWindow, false}, {"reason", &h.Reason, false}, {"paths", &h.Paths, false},
		{"timestamp", &h.Timestamp, false}, {"cookie", &h.Cookie, true},
		{"token", &h.Token, true}, {"reset_token", &h.ResetToken, true},
	}
	if h.Opcode != wire.OpConnect && h.Opcode != wire.OpAccept {
		return append(f, specField{"app_reason", &h.AppReason, false},
			specField{"private_len", &h.PrivateLen, false}, specField{"private", specPrivate{h}, true})
	}
	// Offset 80 is the plane-address count in CONNECT and ACCEPT (§7.9).
	return append(f, specField{"plane_addrs", &h.PlaneAddrs, false},
		specField{"private_len", &h.PrivateLen, false}, specField{"private", specPrivate{h}, true},
		specField{"planes", specPlanes{h}, true})
}

// specPlanes is the plane addresses of a CONNECT or ACCEPT as a vector
// lists them: 16 bytes each, concatenated.
type specPlanes struct{ h *wire.ConnHeader }

// fieldsOf returns v's fields, pointing into v's headers.
func (v *specVector) fieldsOf() []specField {
	switch {
	case v.data != nil:
		return specDataFields(v.data, &v.payload)
	case v.ack != nil:
		op := wire.OpAck
		return specAckFields(&op, v.ack)
	case v.nack != nil:
		op := wire.OpNack
		return specNackFields(&op, v.nack)
	default:
		return specConnFields(v.conn)
	}
}

func specFormatField(f specField) string {
	switch p := f.ptr.(type) {
	case *wire.Opcode:
		return p.String()
	case *wire.NackReason:
		return p.String()
	case *wire.ConnReason:
		if s, ok := specConnReasonNames[*p]; ok {
			return s
		}
		return strconv.Itoa(int(*p))
	case *uint16:
		return specFormatInt(uint64(*p), 4, f.hexa)
	case *uint32:
		return specFormatInt(uint64(*p), 8, f.hexa)
	case *wire.PSN:
		return specFormatInt(uint64(*p), 8, f.hexa)
	case *uint64:
		return specFormatInt(*p, 16, f.hexa)
	case *[wire.SackBytes]byte:
		return hex.EncodeToString(p[:])
	case *[wire.CookieLen]byte:
		return hex.EncodeToString(p[:])
	case *[]byte:
		return hex.EncodeToString(*p)
	case specPrivate:
		return hex.EncodeToString(p.h.Private[:p.h.PrivateLen])
	case specPlanes:
		var b []byte
		for i := range p.h.PlaneAddrs {
			b = append(b, p.h.Planes[i][:]...)
		}
		return hex.EncodeToString(b)
	}
	panic(fmt.Sprintf("field %s: unhandled type %T", f.key, f.ptr))
}

func specFormatInt(v uint64, digits int, hexa bool) string {
	if hexa {
		return fmt.Sprintf("0x%0*x", digits, v)
	}
	return strconv.FormatUint(v, 10)
}

func specSetField(f specField, s string) error {
	parse := func(bits int) (uint64, error) { return strconv.ParseUint(s, 0, bits) }
	switch p := f.ptr.(type) {
	case *wire.Opcode:
		for i := 0; i < 256; i++ {
			if op := wire.Opcode(i); op.Class() != wire.ClassInvalid && op.String() == s {
				*p = op
				return nil
			}
		}
		return fmt.Errorf("unknown opcode %q", s)
	case *wire.NackReason:
		for i := 1; i < 256; i++ {
			if r := wire.NackReason(i); r.String() == s {
				*p = r
				return nil
			}
		}
		return fmt.Errorf("unknown NACK reason %q", s)
	case *wire.ConnReason:
		for r, name := range specConnReasonNames {
			if name == s {
				*p = r
				return nil
			}
		}
		v, err := parse(16)
		*p = wire.ConnReason(v)
		return err
	case *uint16:
		v, err := parse(16)
		*p = uint16(v)
		return err
	case *uint32:
		v, err := parse(32)
		*p = uint32(v)
		return err
	case *wire.PSN:
		v, err := parse(32)
		*p = wire.PSN(v)
		return err
	case *uint64:
		v, err := parse(64)
		*p = v
		return err
	case *[wire.SackBytes]byte:
		return specDecodeFixed(p[:], s)
	case *[wire.CookieLen]byte:
		return specDecodeFixed(p[:], s)
	case *[]byte:
		b, err := hex.DecodeString(s)
		*p = b
		return err
	case specPrivate:
		b, err := hex.DecodeString(s)
		if err == nil && len(b) != int(p.h.PrivateLen) {
			err = fmt.Errorf("%d bytes of private data, private_len %d", len(b), p.h.PrivateLen)
		}
		p.h.SetPrivate(b)
		return err
	case specPlanes:
		b, err := hex.DecodeString(s)
		if err == nil && (len(b) != int(p.h.PlaneAddrs)*wire.PlaneAddrLen || p.h.PlaneAddrs > wire.MaxPlaneAddrs) {
			return fmt.Errorf("%d bytes of plane addresses, plane_addrs %d", len(b), p.h.PlaneAddrs)
		}
		for i := range p.h.PlaneAddrs {
			copy(p.h.Planes[i][:], b[int(i)*wire.PlaneAddrLen:])
		}
		return err
	}
	return fmt.Errorf("field %s: unhandled type %T", f.key, f.ptr)
}

func specDecodeFixed(dst []byte, s string) error {
	b, err := hex.DecodeString(s)
	if err != nil {
		return err
	}
	if len(b) != len(dst) {
		return fmt.Errorf("%d bytes, want %d", len(b), len(dst))
	}
	copy(dst, b)
	return nil
}

// specHexDump writes b as "hex:" lines of 16 bytes, each with its offset.
func specHexDump(w *strings.Builder, b []byte) {
	for off := 0; off < len(b); off += 16 {
		fmt.Fprintf(w, "hex: %04x ", off)
		for i := off; i < min(off+16, len(b)); i++ {
			if i-off == 8 {
				w.WriteByte(' ')
			}
			fmt.Fprintf(w, " %02x", b[i])
		}
		w.WriteByte('\n')
	}
}

// specGenerate returns the text between the markers.
func specGenerate(t *testing.T) string {
	t.Helper()
	var w strings.Builder
	w.WriteString("\n### 12.3 Packet vectors\n")
	vs := specVectors()
	for i := range vs {
		v := &vs[i]
		pkt := v.encode()
		fmt.Fprintf(&w, "\n#### 12.3.%d `%s`: %s\n\n%s\n\n```vector\nname: %s\n", i+1, v.name, v.title, v.note, v.name)
		for _, f := range v.fieldsOf() {
			fmt.Fprintf(&w, "%s: %s\n", f.key, specFormatField(f))
		}
		fmt.Fprintf(&w, "crc: 0x%08x\n", binary.BigEndian.Uint32(pkt[len(pkt)-wire.TrailerLen:]))
		specHexDump(&w, pkt)
		w.WriteString("```\n")
	}

	input, ck := specCookie(specCookieSecret, specCookiePeer, specConnA, 1, specIssueT)
	w.WriteString("\n### 12.4 Cookie and reset-token examples\n\n")
	w.WriteString("The cookie of the `challenge` and `connect-cookie` vectors, computed as §7.4 describes " +
		"with a listener secret of the 32 bytes 0x00..0x1f. `mac_input` is the HMAC message; " +
		"the peer's IPv4 address enters it in its IPv4-mapped 16-byte form.\n\n")
	fmt.Fprintf(&w, "```cookie\nname: challenge-cookie\nsecret: %x\npeer: %s\nsrc_conn: 0x%08x\nservice: 1\nissue_time: %d\nmac_input: %x\ncookie: %x\nused_by: challenge connect-cookie\n```\n",
		specCookieSecret, specCookiePeer, specConnA, specIssueT, input, ck[:])
	w.WriteString("\nThe reset tokens of the vectors, computed as §7.6 describes: B's secret is the cookie secret " +
		"above, A's the 32 bytes 0x20..0x3f. `mac_input` is the HMAC message, \"RST\" and the id.\n")
	for _, r := range specResetExamples {
		in, tok := specResetToken(r.secret, r.id)
		fmt.Fprintf(&w, "\n%s%s:\n\n```resettoken\nname: %s\nsecret: %x\nconn_id: 0x%08x\nmac_input: %x\nreset_token: %x\nused_by: %s\n```\n",
			strings.ToUpper(r.who[:1]), r.who[1:], r.name, r.secret, r.id, in, tok[:], r.usedBy)
	}

	fe := &specFrameExample
	var payload []byte
	for i := range vs {
		if vs[i].name == fe.carries {
			payload = vs[i].encode()
		}
	}
	fr, err := specBuildFrame(&fe.ep, fe.dscp, fe.ecn, payload)
	if err != nil {
		t.Fatalf("frame example: %v", err)
	}
	w.WriteString("\n### 12.5 Frame example (informative)\n\n")
	w.WriteString("The `ack` vector as B sends it to A: Ethernet II, IPv4 (DF set, TTL 64, ID 0, " +
		"TOS 0xc2 = DSCP 48 << 2 | ECT(0)), UDP from B's path entropy 50000 to port 4792 with its checksum " +
		"filled in (§2). The Ethernet FCS is not shown.\n\n")
	fmt.Fprintf(&w, "```frame\nname: %s\ncarries: %s\nsrc_mac: %s\ndst_mac: %s\nsrc_ip: %s\ndst_ip: %s\nsrc_port: %d\ndst_port: %d\ndscp: %d\necn: %d\n",
		fe.name, fe.carries, net.HardwareAddr(fe.ep.SrcMAC[:]), net.HardwareAddr(fe.ep.DstMAC[:]),
		fe.ep.Src, fe.ep.Dst, fe.ep.SrcPort, fe.ep.DstPort, fe.dscp, fe.ecn)
	specHexDump(&w, fr)
	w.WriteString("```\n\n")
	return w.String()
}

// specBlock is one fenced block of §12 as read from the document.
type specBlock struct {
	kind string // vector, cookie, frame
	line int
	keys []string
	vals map[string]string
	hex  []byte
}

var specHexLine = regexp.MustCompile(`^([0-9a-f]{4})((?:\s+[0-9a-f]{2})+)$`)

// specReadBlocks extracts every ```vector, ```cookie and ```frame block of
// text, whose first line is line first+1 of spec.md.
func specReadBlocks(text string, first int) ([]specBlock, error) {
	var out []specBlock
	var cur *specBlock
	for i, line := range strings.Split(text, "\n") {
		ln := first + i + 1
		if cur == nil {
			switch strings.TrimSpace(line) {
			case "```vector", "```cookie", "```frame", "```resettoken":
				cur = &specBlock{kind: strings.TrimPrefix(strings.TrimSpace(line), "```"), line: ln, vals: map[string]string{}}
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			out = append(out, *cur)
			cur = nil
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("spec.md:%d: want \"key: value\", got %q", ln, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "hex" {
			m := specHexLine.FindStringSubmatch(v)
			if m == nil {
				return nil, fmt.Errorf("spec.md:%d: malformed hex line %q", ln, v)
			}
			if off, _ := strconv.ParseUint(m[1], 16, 32); int(off) != len(cur.hex) {
				return nil, fmt.Errorf("spec.md:%d: hex offset %s, want %04x", ln, m[1], len(cur.hex))
			}
			b, err := hex.DecodeString(strings.Join(strings.Fields(m[2]), ""))
			if err != nil {
				return nil, fmt.Errorf("spec.md:%d: %v", ln, err)
			}
			cur.hex = append(cur.hex, b...)
			continue
		}
		if _, dup := cur.vals[k]; dup {
			return nil, fmt.Errorf("spec.md:%d: key %q repeated", ln, k)
		}
		cur.keys = append(cur.keys, k)
		cur.vals[k] = v
	}
	if cur != nil {
		return nil, fmt.Errorf("spec.md:%d: block not closed", cur.line)
	}
	return out, nil
}

// specListed builds a vector from a block's fields, requiring exactly the keys
// its class has.
func specListed(b *specBlock) (*specVector, error) {
	var op wire.Opcode
	if err := specSetField(specField{"opcode", &op, false}, b.vals["opcode"]); err != nil {
		return nil, err
	}
	v := &specVector{name: b.vals["name"]}
	switch op.Class() {
	case wire.ClassData:
		v.data = &wire.DataHeader{Opcode: op}
	case wire.ClassAck:
		v.ack = &wire.AckHeader{}
	case wire.ClassNack:
		v.nack = &wire.NackHeader{}
	default:
		v.conn = &wire.ConnHeader{Opcode: op}
	}
	want := map[string]bool{"name": true, "crc": true}
	for _, f := range v.fieldsOf() {
		want[f.key] = true
		s, ok := b.vals[f.key]
		if !ok {
			return nil, fmt.Errorf("missing key %q", f.key)
		}
		if err := specSetField(f, s); err != nil {
			return nil, fmt.Errorf("%s: %v", f.key, err)
		}
	}
	for _, k := range b.keys {
		if !want[k] {
			return nil, fmt.Errorf("key %q does not belong to a %s vector", k, op)
		}
	}
	return v, nil
}

// specDecoded returns the vector Parse and Decode make of pkt.
func specDecoded(p wire.Packet) *specVector {
	v := &specVector{}
	switch p.Class {
	case wire.ClassData:
		v.data = &wire.DataHeader{}
		v.data.Decode(p.Data())
		v.payload = append([]byte{}, p.Data().Payload()...)
	case wire.ClassAck:
		v.ack = &wire.AckHeader{}
		v.ack.Decode(p.Ack())
	case wire.ClassNack:
		v.nack = &wire.NackHeader{}
		v.nack.Decode(p.Nack())
	case wire.ClassConn:
		v.conn = &wire.ConnHeader{}
		v.conn.Decode(p.Conn())
	}
	return v
}

func specSameFields(a, b *specVector) bool {
	switch {
	case a.data != nil && b.data != nil:
		return *a.data == *b.data && bytes.Equal(a.payload, b.payload)
	case a.ack != nil && b.ack != nil:
		return *a.ack == *b.ack
	case a.nack != nil && b.nack != nil:
		return *a.nack == *b.nack
	case a.conn != nil && b.conn != nil:
		return *a.conn == *b.conn
	}
	return false
}

// specRead returns the document, the text between the markers, and the
// number of lines before that text.
func specRead(t *testing.T) (doc, section string, first int) {
	t.Helper()
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatalf("read the specification: %v", err)
	}
	doc = string(raw)
	i, j := strings.Index(doc, vectorBegin), strings.Index(doc, vectorEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: markers %q ... %q not found", specPath, vectorBegin, vectorEnd)
	}
	i += len(vectorBegin)
	return doc, doc[i:j], strings.Count(doc[:i], "\n")
}

// TestSpecVectors checks every vector of §12 against the codec, that every
// opcode has one, and that the section is what specVectors generates.
func TestSpecVectors(t *testing.T) {
	doc, section, first := specRead(t)
	gen := specGenerate(t)
	if *updateSpec && section != gen {
		doc = strings.Replace(doc, vectorBegin+section+vectorEnd, vectorBegin+gen+vectorEnd, 1)
		if err := os.WriteFile(specPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		section = gen
	}
	if section != gen {
		t.Errorf("%s §12 differs from specVectors in spec_test.go: run go test ./wire -run TestSpecVectors -update", specPath)
	}

	blocks, err := specReadBlocks(section, first)
	if err != nil {
		t.Fatal(err)
	}
	packets := map[string][]byte{}
	covered := map[wire.Opcode]bool{}
	for i := range blocks {
		b := &blocks[i]
		if b.kind != "vector" {
			continue
		}
		name := b.vals["name"]
		if name == "" || packets[name] != nil {
			t.Fatalf("vector at line %d: missing or repeated name %q", b.line, name)
		}
		packets[name] = b.hex
		t.Run(name, func(t *testing.T) {
			want, err := specListed(b)
			if err != nil {
				t.Fatalf("listed fields: %v", err)
			}
			p, err := wire.Parse(b.hex)
			if err != nil {
				t.Fatalf("Parse rejects the hex dump: %v", err)
			}
			covered[p.Prefix().Opcode()] = true
			if got := specDecoded(p); !specSameFields(got, want) {
				t.Errorf("decoded fields differ from the listed ones:\n got %s\nwant %s", specDescribe(got), specDescribe(want))
			}
			crc, err := strconv.ParseUint(b.vals["crc"], 0, 32)
			if err != nil || uint32(crc) != binary.BigEndian.Uint32(b.hex[len(b.hex)-wire.TrailerLen:]) {
				t.Errorf("crc %q does not match the trailer % x", b.vals["crc"], b.hex[len(b.hex)-wire.TrailerLen:])
			}
			if enc := want.encode(); !bytes.Equal(enc, b.hex) {
				t.Errorf("encoding the listed fields gives\n% x\nwant (the hex dump)\n% x", enc, b.hex)
			}
		})
	}
	for i := 0; i < 256; i++ {
		if op := wire.Opcode(i); op.Class() != wire.ClassInvalid && !covered[op] {
			t.Errorf("opcode %s (0x%02x) has no test vector that parses", op, i)
		}
	}
	for i := range blocks {
		switch b := &blocks[i]; b.kind {
		case "cookie":
			specCheckCookie(t, b, packets)
		case "resettoken":
			specCheckResetToken(t, b, packets)
		case "frame":
			specCheckFrame(t, b, packets)
		}
	}
}

func specDescribe(v *specVector) string {
	var parts []string
	for _, f := range v.fieldsOf() {
		parts = append(parts, f.key+"="+specFormatField(f))
	}
	return strings.Join(parts, " ")
}

func specCheckCookie(t *testing.T, b *specBlock, packets map[string][]byte) {
	t.Helper()
	secret, err1 := hex.DecodeString(b.vals["secret"])
	peer, err2 := netip.ParseAddr(b.vals["peer"])
	src, err3 := strconv.ParseUint(b.vals["src_conn"], 0, 32)
	svc, err4 := strconv.ParseUint(b.vals["service"], 0, 32)
	it, err5 := strconv.ParseUint(b.vals["issue_time"], 0, 32)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			t.Fatalf("cookie block at line %d: %v", b.line, err)
		}
	}
	input, ck := specCookie(secret, peer, uint32(src), uint32(svc), uint32(it))
	if got := b.vals["mac_input"]; got != hex.EncodeToString(input) {
		t.Errorf("cookie mac_input %s, want %x", got, input)
	}
	if got := b.vals["cookie"]; got != hex.EncodeToString(ck[:]) {
		t.Errorf("cookie %s, want %x", got, ck[:])
	}
	for _, name := range strings.Fields(b.vals["used_by"]) {
		pkt := packets[name]
		p, err := wire.Parse(pkt)
		if err != nil || p.Class != wire.ClassConn || !bytes.Equal(p.Conn().Cookie(), ck[:]) {
			t.Errorf("vector %s does not carry the example cookie", name)
		}
	}
}

func specCheckResetToken(t *testing.T, b *specBlock, packets map[string][]byte) {
	t.Helper()
	secret, err1 := hex.DecodeString(b.vals["secret"])
	id, err2 := strconv.ParseUint(b.vals["conn_id"], 0, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("resettoken block at line %d: %v %v", b.line, err1, err2)
	}
	input, tok := specResetToken(secret, uint32(id))
	if got := b.vals["mac_input"]; got != hex.EncodeToString(input) {
		t.Errorf("reset token mac_input %s, want %x", got, input)
	}
	if got := b.vals["reset_token"]; got != hex.EncodeToString(tok[:]) {
		t.Errorf("reset token %s, want %x", got, tok[:])
	}
	for _, name := range strings.Fields(b.vals["used_by"]) {
		p, err := wire.Parse(packets[name])
		if err != nil || p.Class != wire.ClassConn || !bytes.Equal(p.Conn().ResetToken(), tok[:]) {
			t.Errorf("vector %s does not carry the reset token %s", name, b.vals["name"])
		}
	}
}

func specCheckFrame(t *testing.T, b *specBlock, packets map[string][]byte) {
	t.Helper()
	payload := packets[b.vals["carries"]]
	if payload == nil {
		t.Fatalf("frame %s carries unknown vector %q", b.vals["name"], b.vals["carries"])
	}
	var f frame.Frame
	if err := frame.Parse(b.hex, &f); err != nil {
		t.Fatalf("frame %s: frame.Parse: %v", b.vals["name"], err)
	}
	got := map[string]string{
		"src_mac": net.HardwareAddr(f.SrcMAC[:]).String(), "dst_mac": net.HardwareAddr(f.DstMAC[:]).String(),
		"src_ip": f.Src.String(), "dst_ip": f.Dst.String(),
		"src_port": strconv.Itoa(int(f.SrcPort)), "dst_port": strconv.Itoa(int(f.DstPort)),
		"dscp": strconv.Itoa(int(f.DSCP)), "ecn": strconv.Itoa(int(f.ECN)),
	}
	for k, v := range got {
		if b.vals[k] != v {
			t.Errorf("frame %s: %s is %s in the dump, listed %s", b.vals["name"], k, v, b.vals[k])
		}
	}
	if !bytes.Equal(f.Payload, payload) {
		t.Errorf("frame %s: UDP payload is not the %s vector", b.vals["name"], b.vals["carries"])
	}
	ep := f.Endpoints
	re, err := specBuildFrame(&ep, f.DSCP, f.ECN, payload)
	if err != nil || !bytes.Equal(re, b.hex) {
		t.Errorf("frame %s: frame.Build and Finish give\n% x\nwant\n% x (err %v)", b.vals["name"], re, b.hex, err)
	}
}

// TestSpecTables checks the code-point tables of the specification: every
// row of the form "| `0x..` | `NAME` |" must agree with this package, and
// every opcode, flag and reason the package defines must have its row.
func TestSpecTables(t *testing.T) {
	doc, _, _ := specRead(t)
	row := regexp.MustCompile("^\\|\\s*`0x([0-9a-fA-F]+)`\\s*\\|\\s*`([A-Z_]+)`\\s*\\|")
	rows := map[string]uint64{}
	for _, line := range strings.Split(doc, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseUint(m[1], 16, 32)
			if old, dup := rows[m[2]]; dup && old != v {
				t.Errorf("spec names %s both 0x%x and 0x%x", m[2], old, v)
			}
			rows[m[2]] = v
		}
	}
	want := map[string]uint64{"ACK_REQ": uint64(wire.FlagAckReq), "RETX": uint64(wire.FlagRetx), "VOID": uint64(wire.FlagVoid)}
	for i := 0; i < 256; i++ {
		if op := wire.Opcode(i); op.Class() != wire.ClassInvalid {
			want[op.String()] = uint64(i)
		}
	}
	// Every reason the package names (an undefined one prints as NACK_xx).
	for r := wire.NackReason(1); r != 0 && !strings.HasPrefix(r.String(), "NACK_"); r++ {
		want[r.String()] = uint64(r)
	}
	for r, name := range specConnReasonNames {
		want[name] = uint64(r)
	}
	for name, v := range want {
		got, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("spec has no table row for %s (0x%02x)", name, v)
		case got != v:
			t.Errorf("spec gives %s as 0x%02x, the code as 0x%02x", name, got, v)
		}
	}
	for name := range rows {
		if _, ok := want[name]; !ok {
			t.Errorf("spec table row %s names nothing the code defines", name)
		}
	}
}

// TestCRCCheckValue pins §3.4: CRC32C of the ASCII string "123456789" is
// 0xe3069283.
func TestCRCCheckValue(t *testing.T) {
	if got := wire.Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("Checksum(\"123456789\") = %#08x, want 0xe3069283", got)
	}
}
