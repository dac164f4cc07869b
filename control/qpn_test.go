package control

import (
	"testing"

	"github.com/metaroce/metaroce/control/proto"
)

// TestDrawnNumbersLeavePorts: the numbers the daemon draws for queue
// pairs and listeners carry their engine's tag, stay within
// MinDrawn..MaxService (so never a port number a chosen-service listener
// may want), and are never handed out twice while held; a chosen one is
// refused while drawn and taken once free.
func TestDrawnNumbersLeavePorts(t *testing.T) {
	s := &Server{qpns: map[uint32]bool{}}
	e := &Engine{Mask: 3, Tag: 2, engine: 2}
	s.engines = []*Engine{{Mask: 3}, {Mask: 3, Tag: 1, engine: 1}, e}
	const n = 20000 // a floor-blind draw from 2^22 numbers lands below 2^16 with p = 1/256 each
	for range n {
		q := s.newQPN(e)
		if q < proto.MinDrawn || q > proto.MaxService || q&e.Mask != e.Tag {
			t.Fatalf("drew %#x for an engine with mask %#x, tag %#x", q, e.Mask, e.Tag)
		}
	}
	if len(s.qpns) != n {
		t.Fatalf("%d distinct numbers of %d drawn", len(s.qpns), n)
	}
	var held uint32
	for q := range s.qpns {
		held = q
		break
	}
	if err := s.claimService(e, held); err == nil || err.(*proto.Error).Code != proto.CodeBusy {
		t.Fatalf("claiming a drawn number: %v", err)
	}
	s.freeQPN(held)
	if err := s.claimService(e, held); err != nil {
		t.Fatalf("claiming it once free: %v", err)
	}
	if err := s.claimService(e, 5002); err != nil {
		t.Fatalf("claiming a port number with the tag: %v", err)
	}
}
