package wire_test

import (
	"fmt"

	"github.com/metaroce/metaroce/wire"
)

// A receiver parses each frame once, counts drops by reason without
// allocating, and reads fields through the view of the packet's class.
func ExampleParse() {
	var drops [wire.NumReasons]uint64

	h := wire.DataHeader{Opcode: wire.OpSend, PSN: 7, MsgLen: 5, RecvSeq: 1}
	good := wire.AppendData(nil, &h, []byte("hello"))
	bad := append([]byte(nil), good...)
	bad[70] ^= 1 // corrupted in flight

	for _, frame := range [][]byte{good, bad} {
		p, err := wire.Parse(frame)
		if err != nil {
			drops[err.(wire.Error).Reason()]++
			continue
		}
		if p.Class == wire.ClassData {
			d := p.Data()
			fmt.Printf("%s psn=%d payload=%q\n", d.Opcode(), d.PSN(), d.Payload())
		}
	}
	for r, n := range drops {
		if n > 0 {
			fmt.Printf("dropped %s: %d\n", wire.ReasonName(r), n)
		}
	}
	// Output:
	// SEND psn=7 payload="hello"
	// dropped crc: 1
}
