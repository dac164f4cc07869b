package transport

import (
	"encoding/binary"
	"net/netip"
)

// replyLimiter bounds stateless replies (§7.8): at most rate per
// millisecond in all, of which an address past its share (perSource)
// gets only the first half. So one host flooding CONNECTs (or packets for
// unknown ids) cannot take the whole budget and leave honest initiators'
// CHALLENGEs dropped, as it did before (2 of 20 connects failed during a
// REJECT flood, issue 22): the second half is kept for addresses within
// their share. An address alone may still draw half the budget (a peer
// with many stale connections learns of them at that rate), and what a
// forged source address can reflect at one victim is half the total.
//
// Per-source counts live in a count-min sketch: two rows of counters
// indexed by two keyed hashes of the address, a source's count being the
// smaller of its two counters. It keeps no state per address (a flood
// from many spoofed addresses costs no memory), a source is refused only
// if both its counters are full, and the hash key, drawn at start, keeps
// an attacker from choosing addresses that share an honest peer's
// counters. Counters carry the window they count, so a new window needs
// no clearing pass.
type replyLimiter struct {
	rate, perSource int
	tokens          int
	window          Time // start of the current millisecond window
	epoch           uint32
	k0, k1          uint64
	rows            [2][replyBuckets]replyCount
}

const replyBuckets = 256

type replyCount struct {
	epoch uint32
	n     uint16
}

// init sets the rates and the hash key (16 random bytes).
func (l *replyLimiter) init(rate int, key [16]byte) {
	l.rate = rate
	l.perSource = max(2, rate/8)
	l.tokens = rate
	l.k0, l.k1 = binary.LittleEndian.Uint64(key[:8]), binary.LittleEndian.Uint64(key[8:])
}

// allow reports whether a reply to dst may be sent at now, and takes it
// from the budgets if so.
func (l *replyLimiter) allow(now Time, dst netip.Addr) bool {
	if now-l.window >= 1e6 {
		l.tokens, l.window = l.rate, now
		l.epoch++
	}
	if l.tokens == 0 {
		return false
	}
	a := dst.As16()
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	c0 := l.counter(0, mix(hi^l.k0, lo^l.k1))
	c1 := l.counter(1, mix(lo^l.k1, hi^l.k0^0x9e3779b97f4a7c15))
	if int(min(c0.n, c1.n)) >= l.perSource && 2*l.tokens <= l.rate {
		return false
	}
	c0.n++
	c1.n++
	l.tokens--
	return true
}

func (l *replyLimiter) counter(row int, h uint64) *replyCount {
	c := &l.rows[row][h%replyBuckets]
	if c.epoch != l.epoch {
		c.epoch, c.n = l.epoch, 0
	}
	return c
}

// mix is a 128-to-64-bit mixing function (a multiply-xorshift finaliser
// over both words). Keyed by the caller, it spreads addresses over the
// buckets; it is no MAC, and needs not be: guessing a bucket's key-
// dependent members only lets an attacker share a victim's counter, and
// the second row makes that sharing need two guesses at once.
func mix(a, b uint64) uint64 {
	h := a*0xff51afd7ed558ccd ^ b
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 29
	h += b * 0x9e3779b97f4a7c15
	h ^= h >> 32
	return h
}
