package ring

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrCorrupt is returned by Reserve, Peek and the wait and notify calls once
// the peer has written an index that no correct peer could write: a
// producer index more than a ring's worth ahead of what we consumed or
// behind what we already took, or a consumer index ahead of what we
// produced. It is sticky: the view refuses all further work, since nothing
// the peer says can be believed any more. The owner should drop the peer.
var ErrCorrupt = errors.New("ring: peer wrote an impossible index")

// pad keeps a view's hot fields off the cache lines of whatever the
// allocator places next to it (the other view, in-process).
type pad [cacheLine]byte

// Producer writes slots and publishes them. Its private state is the truth
// about what it has published: it reads the shared producer word once, when
// made, and afterwards only stores it; the only shared word it loads is the
// consumer's index.
//
// Slots in [prod, reserved) are reserved by Reserve and not yet published;
// [reserved, cachedCons+size) are known free.
type Producer struct {
	_          pad
	reserved   uint32 // next index Reserve hands out
	prod       uint32 // last value stored to the producer word
	cachedCons uint32 // consumer word as last loaded and checked
	mask       uint32 // slots-1
	size       uint32 // slots
	slotSize   int
	slots      []byte
	prodWord   *uint32
	consWord   *uint32
	flagWord   *uint32
	err        error  // sticky ErrCorrupt
	rings      uint64 // doorbell rings by Notify; only the owner writes
	_          pad
}

func newProducer(r *Ring) *Producer {
	p := &Producer{
		mask:     r.geom.slots - 1,
		size:     r.geom.slots,
		slotSize: int(r.geom.slotSize),
		slots:    r.slots,
		prodWord: r.prodWord,
		consWord: r.consWord,
		flagWord: r.flagWord,
	}
	p.prod = atomic.LoadUint32(p.prodWord)
	p.reserved = p.prod
	p.cachedCons = p.prod - p.size // nothing known free until loaded
	p.load()
	return p
}

// load reads the consumer index (one load-acquire) and checks it lies in the
// only window a correct consumer can be in: at most size behind what we
// published, not ahead of it, and not so far back that our reservation would
// overrun it. It returns the free count.
func (p *Producer) load() (uint32, error) {
	c := atomic.LoadUint32(p.consWord)
	if p.prod-c > p.size || p.reserved-c > p.size {
		p.err = ErrCorrupt
		return 0, p.err
	}
	p.cachedCons = c
	return c + p.size - p.reserved, nil
}

// Reserve claims up to n free slots for writing and returns the index of the
// first and how many it got (0 when the ring is full). It loads the
// consumer's index only when the cached view shows fewer than n free. Write
// slots first .. first+got-1 with Slot, then Commit.
func (p *Producer) Reserve(n uint32) (first, got uint32, err error) {
	if p.err != nil {
		return p.reserved, 0, p.err
	}
	free := p.cachedCons + p.size - p.reserved
	if free < n {
		if free, err = p.load(); err != nil {
			return p.reserved, 0, err
		}
	}
	got = min(n, free)
	first = p.reserved
	p.reserved += got
	return first, got, nil
}

// Slot is the memory of reserved slot i. It panics if i is not reserved:
// writing any other slot would scribble over records the consumer owns.
// The consumer may read the slot as soon as Commit publishes it.
func (p *Producer) Slot(i uint32) []byte {
	if i-p.prod >= p.reserved-p.prod {
		panic(fmt.Sprintf("ring: Producer.Slot(%d) outside the reservation [%d, %d)", i, p.prod, p.reserved))
	}
	off := int(i&p.mask) * p.slotSize
	return p.slots[off : off+p.slotSize : off+p.slotSize]
}

// Commit publishes the first n reserved slots with one store-release of the
// producer index, and gives the rest of the reservation back: the next
// Reserve hands them out again. Commit(0) publishes nothing and cancels the
// reservation. It panics if n exceeds what is reserved.
func (p *Producer) Commit(n uint32) {
	if n > p.reserved-p.prod {
		panic(fmt.Sprintf("ring: Commit(%d) of %d reserved slots", n, p.reserved-p.prod))
	}
	p.reserved = p.prod + n
	if n == 0 {
		return
	}
	p.prod = p.reserved
	atomic.StoreUint32(p.prodWord, p.prod)
}

// Free returns how many slots Reserve could hand out now (one atomic load).
func (p *Producer) Free() (uint32, error) {
	if p.err != nil {
		return 0, p.err
	}
	return p.load()
}

// Rings is how many times Notify rang the doorbell: the syscalls a busy
// consumer saved are the commits minus this.
func (p *Producer) Rings() uint64 { return p.rings }

// Consumer reads published slots and hands them back. Like Producer it reads
// its own shared word once, when made, and afterwards only stores it; the
// only shared word it loads is the producer's index, and it checks every
// value before use, so no index the peer writes can take a read outside the
// slot array or hand out a slot twice in one window.
//
// Slots in [cons, peeked) are handed out by Peek and not yet released;
// [peeked, cachedProd) are known published.
type Consumer struct {
	_          pad
	peeked     uint32 // next index Peek hands out
	cons       uint32 // last value stored to the consumer word
	cachedProd uint32 // producer word as last loaded and checked
	mask       uint32
	size       uint32
	slotSize   int
	slots      []byte
	prodWord   *uint32
	consWord   *uint32
	flagWord   *uint32
	err        error  // sticky ErrCorrupt
	sleeps     uint64 // waits that blocked on the doorbell; only the owner writes
	_          pad
}

func newConsumer(r *Ring) *Consumer {
	c := &Consumer{
		mask:     r.geom.slots - 1,
		size:     r.geom.slots,
		slotSize: int(r.geom.slotSize),
		slots:    r.slots,
		prodWord: r.prodWord,
		consWord: r.consWord,
		flagWord: r.flagWord,
	}
	c.cons = atomic.LoadUint32(c.consWord)
	c.peeked = c.cons
	c.cachedProd = c.cons
	c.load()
	return c
}

// load reads the producer index (one load-acquire) and checks it: at most
// size ahead of what we released, and not behind what we already peeked.
// Any other value is one no correct producer writes. It returns how many
// slots are published and not yet peeked.
func (c *Consumer) load() (uint32, error) {
	p := atomic.LoadUint32(c.prodWord)
	if w := p - c.cons; w > c.size || w < c.peeked-c.cons {
		c.err = ErrCorrupt
		return 0, c.err
	}
	c.cachedProd = p
	return p - c.peeked, nil
}

// Peek hands out up to n published slots for reading: the index of the
// first and how many (0 when the ring is empty). It loads the producer's
// index only when the cached view shows fewer than n. Read slots
// first .. first+got-1 with Slot, then Release.
func (c *Consumer) Peek(n uint32) (first, got uint32, err error) {
	if c.err != nil {
		return c.peeked, 0, c.err
	}
	avail := c.cachedProd - c.peeked
	if avail < n {
		if avail, err = c.load(); err != nil {
			return c.peeked, 0, err
		}
	}
	got = min(n, avail)
	first = c.peeked
	c.peeked += got
	return first, got, nil
}

// Slot is the memory of peeked slot i. It panics if i is not peeked. The
// bytes are shared with the peer: a hostile producer can change them while
// you read, so copy a record out before validating it.
func (c *Consumer) Slot(i uint32) []byte {
	if i-c.cons >= c.peeked-c.cons {
		panic(fmt.Sprintf("ring: Consumer.Slot(%d) outside the peeked range [%d, %d)", i, c.cons, c.peeked))
	}
	off := int(i&c.mask) * c.slotSize
	return c.slots[off : off+c.slotSize : off+c.slotSize]
}

// Release hands the first n peeked slots back to the producer with one
// store-release of the consumer index (read them before: the producer may
// overwrite them at once), and un-peeks the rest: the next Peek hands them
// out again. It panics if n exceeds what is peeked.
func (c *Consumer) Release(n uint32) {
	if n > c.peeked-c.cons {
		panic(fmt.Sprintf("ring: Release(%d) of %d peeked slots", n, c.peeked-c.cons))
	}
	c.peeked = c.cons + n
	if n == 0 {
		return
	}
	c.cons = c.peeked
	atomic.StoreUint32(c.consWord, c.cons)
}

// Available returns how many published slots Peek could hand out now. It
// loads the producer's index only when the cache shows none.
func (c *Consumer) Available() (uint32, error) {
	if c.err != nil {
		return 0, c.err
	}
	if a := c.cachedProd - c.peeked; a > 0 {
		return a, nil
	}
	return c.load()
}

// Sleeps is how many times Wait blocked on the doorbell.
func (c *Consumer) Sleeps() uint64 { return c.sleeps }
