package compliance

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/metaroce/metaroce/wire"
)

// The spec's packet vectors (§12.3), sent to the target verbatim. Each
// names connection ids the target does not have (they are the spec's
// example ids), so each draws exactly the answer §7 gives a well-formed
// packet of its opcode from a stranger: RESET for data, ACK, NACK and
// ACCEPT (§7.6), CHALLENGE or REJECT for CONNECT (§7.3), DISCONNECT_ACK
// for DISCONNECT (§7.7), nothing for the rest. A target that drew nothing
// where an answer is due did not take the vector for a valid packet.

func vectorCases() []Case {
	var out []Case
	for _, v := range specVectors {
		out = append(out, Case{ID: "vector-" + v.Name, Clause: v.Clause, Also: []string{"12.1"},
			Title: "the " + v.Name + " vector, sent verbatim, is taken as a valid " + opName(v.Hex) + " from a stranger",
			Run:   func(t *T) { runVector(t, v.Hex) }})
	}
	return out
}

func opName(h string) string {
	b, _ := hex.DecodeString(h)
	if len(b) < 2 {
		return "packet"
	}
	return wire.Opcode(b[1]).String()
}

func runVector(t *T, h string) {
	b, err := hex.DecodeString(h)
	t.must(err)
	if _, err := wire.Parse(b); err != nil {
		t.Fatalf("suite: the vector does not parse: %v", err)
	}
	op := wire.Opcode(b[1])
	dst := binary.BigEndian.Uint32(b[4:8])
	var src uint32
	if op.Class() == wire.ClassConn {
		src = binary.BigEndian.Uint32(b[8:12])
	}
	t.send(b, sendOpts{sport: entropyBase})
	mentions := func(r *rxPacket) bool {
		if r.err != nil {
			return false
		}
		if r.pkt.Class != wire.ClassConn {
			return r.pkt.Prefix().DstConn() == dst || r.pkt.Prefix().DstConn() == src
		}
		c := r.pkt.Conn()
		return c.DstConn() == src && src != 0 || c.DstConn() == dst && dst != 0 || c.SrcConn() == dst && dst != 0
	}
	switch {
	case op.Class() != wire.ClassConn || op == wire.OpAccept:
		checkReset(t, t.expect("RESET for the vector's DstConn "+hex32(dst), isResetFor(dst)), dst)
	case op == wire.OpConnect:
		r := t.expect("CHALLENGE or REJECT for "+hex32(src), func(r *rxPacket) bool {
			return isConnTo(src, wire.OpChallenge)(r) || isConnTo(src, wire.OpReject)(r)
		})
		t.Notef("answered %v", r.pkt.Conn().Opcode())
	case op == wire.OpDisconnect:
		r := t.expectConn(src, wire.OpDisconnectAck)
		t.check(r.pkt.Conn().SrcConn() == dst, "DISCONNECT_ACK SrcConn %s, want %s", hex32(r.pkt.Conn().SrcConn()), hex32(dst))
	default:
		t.none("answer to a "+op.String()+" naming no connection", mentions)
	}
}
