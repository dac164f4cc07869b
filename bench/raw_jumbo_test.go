package bench

import (
	"testing"

	"github.com/metaroce/metaroce/dataplane/afxdp"
)

func TestLayoutFor(t *testing.T) {
	for _, tc := range []struct {
		mtu, frame int
		want       rawLayout
	}{
		{1500, 1514, rawLayout{chunk: 2048}},
		{3000, 3014, rawLayout{chunk: 4096}},
		{afxdp.SingleBufferMTU, afxdp.SingleBufferMTU + 14, rawLayout{chunk: 4096}},
		{4200, 4214, rawLayout{chunk: 4096, sg: true, spanFrames: 2}},
		{9000, 9014, rawLayout{chunk: 4096, sg: true, spanFrames: 3}},
		{9000, 1514, rawLayout{chunk: 4096, sg: true}}, // the frags program, small frames
	} {
		o, err := RawOptions{MTU: tc.mtu, FrameSize: tc.frame}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if got := layoutFor(o); got != tc.want {
			t.Errorf("mtu %d frame %d: %+v, want %+v", tc.mtu, tc.frame, got, tc.want)
		}
	}
}

// FuzzCheckHead: on a whole frame, checkHead (the sink's check of a
// chain's first buffer) agrees with check; on any bytes it never panics,
// and on a buffer too short for the fields it refuses.
func FuzzCheckHead(f *testing.F) {
	tm, err := newTemplate(testEndpoints(false), 200, 0xbeef)
	if err != nil {
		f.Fatal(err)
	}
	good := make([]byte, 200)
	if _, err := tm.build(good, kindBlast, 7); err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:60])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, ok := tm.checkHead(b, kindBlast)
		if len(b) < tm.hdrLen+payloadLen {
			if ok {
				t.Fatalf("%d bytes accepted", len(b))
			}
			return
		}
		if s2, ok2 := tm.check(b, kindBlast, len(b)); ok2 != ok || s2 != seq {
			t.Fatalf("checkHead %d %v, check %d %v", seq, ok, s2, ok2)
		}
	})
}
