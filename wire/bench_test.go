package wire_test

import (
	"testing"

	"github.com/metaroce/metaroce/wire"
)

// Sinks keep the compiler from discarding the work measured.
var (
	sinkPacket wire.Packet
	sinkErr    error
	sinkU32    uint32
)

// payload1400 is a near-full payload for a 1500-byte MTU over IPv4:
// IP (20) + UDP (8) + data header (64) + 1400 + trailer (4) = 1496.
const payload1400 = 1400

func BenchmarkParseData1400(b *testing.B) {
	h, _ := validData(wire.OpWrite)
	h.Offset = 0
	pkt := wire.AppendData(nil, &h, pattern(payload1400))
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		sinkPacket, sinkErr = wire.Parse(pkt)
	}
	if sinkErr != nil {
		b.Fatal(sinkErr)
	}
}

func BenchmarkParseAck(b *testing.B) {
	pkt := validPacket(wire.OpAck)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		sinkPacket, sinkErr = wire.Parse(pkt)
	}
	if sinkErr != nil {
		b.Fatal(sinkErr)
	}
}

// BenchmarkPutSealData1400 is the TX cost per data packet once the payload
// has been copied into the frame: the header, then the CRC over all of it.
func BenchmarkPutSealData1400(b *testing.B) {
	h, _ := validData(wire.OpWrite)
	h.Offset, h.PayloadLen = 0, payload1400
	frame := make([]byte, 64+payload1400+4)
	copy(frame[64:], pattern(payload1400))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		h.PSN++
		h.Put(frame)
		wire.Seal(frame)
	}
	if _, err := wire.Parse(frame); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPutAck includes the trailer: AckHeader.Put seals.
func BenchmarkPutAck(b *testing.B) {
	h := validAck()
	frame := make([]byte, 84)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		h.CumPSN++
		h.Put(frame)
	}
	if _, err := wire.Parse(frame); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkChecksum1400 is the floor under the two data benchmarks above.
func BenchmarkChecksum1400(b *testing.B) {
	buf := pattern(payload1400)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		sinkU32 = wire.Checksum(buf)
	}
}
