package control

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
)

// QuarantineKeys is how many released keys are kept out of circulation:
// a peer holding a stale rkey meets "no such key" rather than a region
// registered since. With 2^32 keys and at most this many in quarantine
// plus the live ones, drawing a free key takes one try almost always.
const QuarantineKeys = 1 << 16

// keys hands out region keys daemon-wide (every session draws from it, so
// no two regions anywhere share a key).
type keys struct {
	mu       sync.Mutex
	live     map[uint32]bool
	recent   []uint32 // ring of released keys
	next     int
	quarantn map[uint32]bool
}

func newKeys() *keys {
	return &keys{live: map[uint32]bool{}, quarantn: map[uint32]bool{}, recent: make([]uint32, 0, QuarantineKeys)}
}

func (k *keys) get() (uint32, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b [4]byte
	for range 64 {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		v := binary.LittleEndian.Uint32(b[:])
		if v == 0 || k.live[v] || k.quarantn[v] {
			continue // 0 reads as "no key" in logs and tools
		}
		k.live[v] = true
		return v, nil
	}
	return 0, errors.New("no free key")
}

func (k *keys) put(v uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.live[v] {
		return
	}
	delete(k.live, v)
	if len(k.recent) < QuarantineKeys {
		k.recent = append(k.recent, v)
	} else {
		delete(k.quarantn, k.recent[k.next])
		k.recent[k.next] = v
		k.next = (k.next + 1) % QuarantineKeys
	}
	k.quarantn[v] = true
}
