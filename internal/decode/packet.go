package decode

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/metaroce/metaroce/wire"
	"github.com/metaroce/metaroce/wire/frame"
)

// Field is one display-filter field of a packet, named as the Wireshark
// dissector (deploy/wireshark/metaroce.lua) names it, with the value as
// `tshark -T fields -E occurrence=a` prints it: unsigned integers in
// decimal, or in hexadecimal with 0x and the field's width where the
// dissector shows them so (ids, PSNs, keys, addresses), byte strings as
// lowercase hex, several occurrences joined by commas.
type Field struct {
	Name, Value string
}

// Fields is a packet's fields in dissection order.
type Fields []Field

// Get returns the value of the named field, "" when the packet has none.
func (fs Fields) Get(name string) string {
	for _, f := range fs {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// add appends a field, joining a repeated name to its first occurrence as
// tshark does.
func (fs *Fields) add(name, value string) {
	for i := range *fs {
		if (*fs)[i].Name == name {
			(*fs)[i].Value += "," + value
			return
		}
	}
	*fs = append(*fs, Field{name, value})
}

func (fs *Fields) dec(name string, v uint64) { fs.add(name, strconv.FormatUint(v, 10)) }

// hex adds v as 0x and width hex digits.
func (fs *Fields) hex(name string, v uint64, width int) {
	fs.add(name, fmt.Sprintf("0x%0*x", width, v))
}

func (fs *Fields) bytes(name string, b []byte) { fs.add(name, hex.EncodeToString(b)) }

func (fs *Fields) bool(name string, v bool) {
	if v {
		fs.add(name, "1")
	} else {
		fs.add(name, "0")
	}
}

// MarshalJSON writes the fields as one object, in order.
func (fs Fields) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		v, _ := json.Marshal(f.Value)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Packet is one MetaRoCE packet of a capture.
type Packet struct {
	// Frame is the 1-based number of the record in the file, as
	// Wireshark numbers frames.
	Frame int       `json:"frame"`
	Time  time.Time `json:"time"`
	Src   string    `json:"src"`
	Dst   string    `json:"dst"`
	DSCP  uint8     `json:"dscp"`
	ECN   uint8     `json:"ecn"`
	// Opcode is the name of §3.2 (OPCODE_xx for an undefined one), "" for
	// a packet too short to have one.
	Opcode string `json:"opcode"`
	// Drop is the reason a receiver drops the packet (§3.5, as
	// wire.ReasonName names it: short, version, opcode, crc, reserved,
	// length, field), "" for a valid packet.
	Drop   string `json:"drop,omitempty"`
	Fields Fields `json:"fields"`

	src, dst netip.AddrPort
	b        []byte // the UDP payload, a copy
}

// connReasons are the names of §7.5 (wire has the codes only).
var connReasons = [...]string{"NONE", "NO_SERVICE", "BAD_COOKIE", "PARAMS", "UNKNOWN_CONN", "LIMIT", "CLOSED", "FAILED", "APPLICATION"}

func connReasonName(r wire.ConnReason) string {
	if int(r) < len(connReasons) {
		return connReasons[r]
	}
	return "REASON_" + strconv.Itoa(int(r))
}

// fixedLen is the fixed header of op's class (§3.4), 0 for an undefined
// opcode.
func fixedLen(op wire.Opcode) int {
	switch op.Class() {
	case wire.ClassData:
		return wire.DataLen
	case wire.ClassAck:
		return wire.AckLen
	case wire.ClassNack:
		return wire.NackLen
	case wire.ClassConn:
		return wire.ConnLen
	}
	return 0
}

// Dissect returns the fields of one UDP payload and the reason a receiver
// drops it ("" if none). Validity is wire.Parse's verdict; the fields are
// read through wire's views wherever the packet is long enough for its
// fixed header, so a packet with a bad CRC or a bad field still shows its
// contents, as it does in Wireshark.
func Dissect(pkt []byte) (Fields, string) {
	var fs Fields
	drop := ""
	if _, err := wire.Parse(pkt); err != nil {
		var we wire.Error
		if errors.As(err, &we) {
			drop = wire.ReasonName(we.Reason())
		} else {
			drop = "unknown"
		}
	}
	n := len(pkt)
	if n < wire.PrefixLen+wire.TrailerLen {
		fs.add("metaroce.drop", drop)
		return fs, drop
	}
	pre := wire.Prefix(pkt)
	op, flags := pre.Opcode(), pre.Flags()
	fs.dec("metaroce.version", uint64(pre.Version()))
	fs.hex("metaroce.opcode", uint64(op), 2)
	fs.hex("metaroce.flags", uint64(flags), 4)
	fs.bool("metaroce.flags.ack_req", flags&wire.FlagAckReq != 0)
	fs.bool("metaroce.flags.retx", flags&wire.FlagRetx != 0)
	fs.bool("metaroce.flags.void", flags&wire.FlagVoid != 0)
	fs.hex("metaroce.dst_conn", uint64(pre.DstConn()), 8)
	var conn = []uint32{pre.DstConn()}
	var path, pathSeq []uint64
	fixed := fixedLen(op)
	if pre.Version() == wire.Version && fixed != 0 && n >= fixed+wire.TrailerLen {
		switch op.Class() {
		case wire.ClassData:
			d := wire.Data(pkt)
			fs.hex("metaroce.psn", uint64(d.PSN()), 8)
			fs.dec("metaroce.path_id", uint64(d.PathID()))
			fs.dec("metaroce.stream", uint64(d.Stream()))
			fs.dec("metaroce.path_seq", uint64(d.PathSeq()))
			fs.dec("metaroce.msg_id", uint64(d.MsgID()))
			fs.dec("metaroce.stream_seq", uint64(d.StreamSeq()))
			fs.dec("metaroce.offset", uint64(d.Offset()))
			fs.dec("metaroce.msg_len", uint64(d.MsgLen()))
			fs.dec("metaroce.payload_len", uint64(d.PayloadLen()))
			fs.bytes("metaroce.reserved", pkt[38:40])
			fs.dec("metaroce.timestamp", d.Timestamp())
			if op.IsSend() {
				fs.dec("metaroce.recv_seq", uint64(d.RecvSeq()))
				fs.bytes("metaroce.reserved", pkt[52:56])
			} else {
				fs.hex("metaroce.remote_addr", d.RemoteAddr(), 16)
			}
			fs.hex("metaroce.rkey", uint64(d.RKey()), 8)
			fs.hex("metaroce.imm", uint64(d.Imm()), 8)
			if pl := n - wire.DataLen - wire.TrailerLen; pl > 0 {
				fs.bytes("metaroce.payload", pkt[wire.DataLen:wire.DataLen+pl])
			}
			path, pathSeq = []uint64{uint64(d.PathID())}, []uint64{uint64(d.PathSeq())}
		case wire.ClassAck:
			a := wire.Ack(pkt)
			fs.hex("metaroce.cum_psn", uint64(a.CumPSN()), 8)
			fs.dec("metaroce.path_id", uint64(a.PathID()))
			fs.dec("metaroce.ce_count", uint64(a.CECount()))
			fs.dec("metaroce.path_ack_seq", uint64(a.PathAckSeq()))
			fs.hex("metaroce.echo_psn", uint64(a.EchoPSN()), 8)
			fs.dec("metaroce.echo_timestamp", a.EchoTimestamp())
			fs.dec("metaroce.rate_hint", uint64(a.RateHint()))
			fs.dec("metaroce.credit", uint64(a.Credit()))
			fs.bytes("metaroce.sack", a.Sack())
			s := SackOf(a)
			fs.dec("metaroce.sack.count", uint64(s.Count))
			for _, r := range s.Arrived {
				fs.add("metaroce.sack.arrived", r.String())
			}
			for _, r := range s.Missing {
				fs.add("metaroce.sack.missing", r.String())
			}
			fs.dec("metaroce.ack_delay", uint64(a.AckDelay()))
			fs.bytes("metaroce.reserved", pkt[76:80])
			path, pathSeq = []uint64{uint64(a.PathID())}, []uint64{uint64(a.PathAckSeq())}
		case wire.ClassNack:
			k := wire.Nack(pkt)
			fs.hex("metaroce.psn", uint64(k.PSN()), 8)
			fs.dec("metaroce.path_id", uint64(k.PathID()))
			fs.dec("metaroce.nack_reason", uint64(k.Reason()))
			fs.bytes("metaroce.reserved", pkt[15:16])
			fs.dec("metaroce.path_seq", uint64(k.PathSeq()))
			fs.hex("metaroce.cum_psn", uint64(k.CumPSN()), 8)
			fs.dec("metaroce.echo_timestamp", k.EchoTimestamp())
			fs.dec("metaroce.info", uint64(k.Info()))
			fs.bytes("metaroce.reserved", pkt[36:40])
			path, pathSeq = []uint64{uint64(k.PathID())}, []uint64{uint64(k.PathSeq())}
		case wire.ClassConn:
			c := wire.Conn(pkt)
			fs.hex("metaroce.src_conn", uint64(c.SrcConn()), 8)
			fs.hex("metaroce.initial_psn", uint64(c.InitialPSN()), 8)
			fs.dec("metaroce.service", uint64(c.Service()))
			fs.dec("metaroce.recv_window", uint64(c.RecvWindow()))
			fs.dec("metaroce.max_payload", uint64(c.MaxPayload()))
			fs.dec("metaroce.msg_window", uint64(c.MsgWindow()))
			fs.dec("metaroce.conn_reason", uint64(c.Reason()))
			fs.dec("metaroce.paths", uint64(c.Paths()))
			fs.dec("metaroce.timestamp", c.Timestamp())
			fs.bytes("metaroce.cookie", c.Cookie())
			fs.hex("metaroce.token", c.Token(), 16)
			fs.bytes("metaroce.reset_token", c.ResetToken())
			planes := c.Opcode() == wire.OpConnect || c.Opcode() == wire.OpAccept
			if planes {
				// Offset 80 counts the plane addresses here (§7.9).
				fs.dec("metaroce.plane_addrs", uint64(c.AppReason()))
			} else {
				fs.dec("metaroce.app_reason", uint64(c.AppReason()))
			}
			fs.dec("metaroce.private_len", uint64(c.PrivateLen()))
			// The private data and plane addresses as far as the packet
			// holds them (a bad length is the LENGTH drop, but still shown).
			pend := min(wire.ConnLen+c.PrivateLen(), n-wire.TrailerLen)
			if pend > wire.ConnLen {
				fs.bytes("metaroce.private", pkt[wire.ConnLen:pend])
			}
			if planes && c.AppReason() > 0 {
				if end := min(pend+int(c.AppReason())*wire.PlaneAddrLen, n-wire.TrailerLen); end > pend {
					fs.bytes("metaroce.planes", pkt[pend:end])
				}
			}
			conn = append(conn, c.SrcConn())
		}
	}
	got := binary.BigEndian.Uint32(pkt[n-wire.TrailerLen:])
	want := wire.Checksum(pkt[:n-wire.TrailerLen])
	fs.hex("metaroce.crc", uint64(got), 8)
	fs.bool("metaroce.crc.status", got == want)
	if got != want {
		fs.hex("metaroce.crc.computed", uint64(want), 8)
	}
	if drop != "" {
		fs.add("metaroce.drop", drop)
	}
	for _, c := range conn {
		fs.hex("metaroce.conn", uint64(c), 8)
	}
	for _, v := range path {
		fs.dec("metaroce.path", v)
	}
	for _, v := range pathSeq {
		fs.dec("metaroce.pathseq", v)
	}
	if flags&wire.FlagRetx != 0 {
		fs.bool("metaroce.retx", true) // present on retransmissions only
	}
	return fs, drop
}

// FieldNames lists every field Dissect can produce, for asking tshark for
// the same ones.
var FieldNames = []string{
	"metaroce.version", "metaroce.opcode", "metaroce.flags", "metaroce.flags.ack_req",
	"metaroce.flags.retx", "metaroce.flags.void", "metaroce.dst_conn",
	"metaroce.psn", "metaroce.path_id", "metaroce.stream", "metaroce.path_seq", "metaroce.msg_id",
	"metaroce.stream_seq", "metaroce.offset", "metaroce.msg_len", "metaroce.payload_len",
	"metaroce.reserved", "metaroce.timestamp", "metaroce.recv_seq", "metaroce.remote_addr",
	"metaroce.rkey", "metaroce.imm", "metaroce.payload",
	"metaroce.cum_psn", "metaroce.ce_count", "metaroce.path_ack_seq", "metaroce.echo_psn",
	"metaroce.echo_timestamp", "metaroce.rate_hint", "metaroce.credit", "metaroce.sack",
	"metaroce.sack.count", "metaroce.sack.arrived", "metaroce.sack.missing", "metaroce.ack_delay",
	"metaroce.nack_reason", "metaroce.info",
	"metaroce.src_conn", "metaroce.initial_psn", "metaroce.service", "metaroce.recv_window",
	"metaroce.max_payload", "metaroce.msg_window", "metaroce.conn_reason", "metaroce.paths",
	"metaroce.cookie", "metaroce.token", "metaroce.reset_token", "metaroce.app_reason",
	"metaroce.plane_addrs", "metaroce.private_len", "metaroce.private", "metaroce.planes",
	"metaroce.crc", "metaroce.crc.status", "metaroce.crc.computed", "metaroce.drop",
	"metaroce.conn", "metaroce.path", "metaroce.pathseq", "metaroce.retx",
}

// SeqRange is an inclusive range of path sequence numbers, First to Last
// in sending order (so Last < First where the range wraps at 2^32).
type SeqRange struct{ First, Last uint32 }

func (r SeqRange) String() string {
	if r.First == r.Last {
		return strconv.FormatUint(uint64(r.First), 10)
	}
	return strconv.FormatUint(uint64(r.First), 10) + "-" + strconv.FormatUint(uint64(r.Last), 10)
}

// Len is the number of sequence numbers in r.
func (r SeqRange) Len() int { return int(r.Last-r.First) + 1 }

// Sack is an ack's bitmap read as ranges, oldest first: Arrived the path
// sequences the receiver has, Missing the holes between the oldest arrival
// the bitmap shows and PathAckSeq.
type Sack struct {
	Arrived, Missing []SeqRange
	Count            int
}

// SackOf reads a's bitmap (§5.1: bit i set, PathAckSeq − i arrived).
func SackOf(a wire.Ack) Sack {
	var s Sack
	top := a.PathAckSeq()
	oldest := -1
	for i := wire.SackBits - 1; i >= 0; i-- {
		if a.Received(uint32(i)) {
			oldest = i
			break
		}
	}
	for i := oldest; i >= 0; {
		set := a.Received(uint32(i))
		j := i
		for j > 0 && a.Received(uint32(j-1)) == set {
			j--
		}
		r := SeqRange{top - uint32(i), top - uint32(j)}
		if set {
			s.Arrived = append(s.Arrived, r)
			s.Count += i - j + 1
		} else {
			s.Missing = append(s.Missing, r)
		}
		i = j - 1
	}
	return s
}

// toEthernet returns rec's packet as an Ethernet frame, rewriting the
// link-layer header of cooked and raw-IP captures into scratch.
func toEthernet(rec Record, scratch []byte) ([]byte, bool) {
	d := rec.Data
	var et uint16
	var l3 []byte
	switch rec.LinkType {
	case linkEthernet:
		return d, true
	case linkSLL:
		if len(d) < 16 {
			return nil, false
		}
		et, l3 = binary.BigEndian.Uint16(d[14:]), d[16:]
	case linkSLL2:
		if len(d) < 20 {
			return nil, false
		}
		et, l3 = binary.BigEndian.Uint16(d[0:]), d[20:]
	case linkRaw, linkIPv4, linkIPv6:
		if len(d) < 1 {
			return nil, false
		}
		switch d[0] >> 4 {
		case 4:
			et = 0x0800
		case 6:
			et = 0x86dd
		default:
			return nil, false
		}
		l3 = d
	default:
		return nil, false
	}
	if len(scratch) < 14+len(l3) {
		return nil, false
	}
	clear(scratch[:12])
	binary.BigEndian.PutUint16(scratch[12:], et)
	n := copy(scratch[14:], l3)
	return scratch[:14+n], true
}

// parser reads the encapsulation without the UDP checksum: a capture on
// the sending host sees checksums the NIC (or veth) has not filled in yet,
// and tshark does not verify them either by default. The CRC32C covers
// the MetaRoCE packet.
var parser = frame.Parser{SkipUDPChecksum: true}

// packetOf returns the MetaRoCE packet in rec, if it carries one to or
// from port.
func packetOf(rec Record, num int, port uint16, scratch []byte, f *frame.Frame) (*Packet, bool) {
	eth, ok := toEthernet(rec, scratch)
	if !ok || parser.Parse(eth, f) != nil {
		return nil, false
	}
	if f.DstPort != port && f.SrcPort != port {
		return nil, false
	}
	b := bytes.Clone(f.Payload)
	fs, drop := Dissect(b)
	p := &Packet{
		Frame: num, Time: rec.Time, DSCP: f.DSCP, ECN: f.ECN, Drop: drop, Fields: fs, b: b,
		src: netip.AddrPortFrom(f.Src.Unmap(), f.SrcPort), dst: netip.AddrPortFrom(f.Dst.Unmap(), f.DstPort),
	}
	p.Src, p.Dst = p.src.String(), p.dst.String()
	if len(b) >= wire.PrefixLen+wire.TrailerLen {
		p.Opcode = wire.Opcode(b[1]).String()
	}
	return p, true
}

// Line is the packet as one line of text: time, addresses, opcode and its
// fields.
func (p *Packet) Line(t0 time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%5d %10.6f %s > %s %s", p.Frame, p.Time.Sub(t0).Seconds(), p.Src, p.Dst, p.Opcode)
	for _, f := range p.Fields {
		switch f.Name {
		case "metaroce.version", "metaroce.opcode", "metaroce.conn", "metaroce.path", "metaroce.pathseq",
			"metaroce.retx", "metaroce.flags.ack_req", "metaroce.flags.retx", "metaroce.flags.void",
			"metaroce.reserved", "metaroce.payload", "metaroce.sack", "metaroce.crc.status", "metaroce.drop":
			continue
		}
		fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(f.Name, "metaroce."), f.Value)
	}
	if p.Drop != "" {
		fmt.Fprintf(&b, " DROP(%s)", p.Drop)
	}
	return b.String()
}
