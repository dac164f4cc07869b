package transport

import "github.com/metaroce/metaroce/wire"

// SetInitialPSN makes e start new connections at psn (for wraparound tests).
func SetInitialPSN(e *Endpoint, psn uint32) {
	e.initialPSN = func() wire.PSN { return wire.PSN(psn) }
}

// Spares returns how many released connections' sender and receiver
// windows e keeps for reuse.
func Spares(e *Endpoint) (send, recv int) { return len(e.spareSend), len(e.spareRecv) }

// NoSpares makes e allocate every connection's windows afresh (the
// baseline of BenchmarkConnChurn).
func NoSpares(e *Endpoint) { e.spareMax, e.spareSend, e.spareRecv = 0, nil, nil }

// Forget makes e drop c without a word to the peer, as an endpoint that
// lost a connection it did not report does (§7.6).
func Forget(c *Conn) {
	c.ep.release(c)
	c.state = StateFailed
}
