package transport

import "github.com/metaroce/metaroce/wire"

// SetInitialPSN makes e start new connections at psn (for wraparound tests).
func SetInitialPSN(e *Endpoint, psn uint32) {
	e.initialPSN = func() wire.PSN { return wire.PSN(psn) }
}
