package daemon

import (
	"github.com/metaroce/metaroce/dataplane/udplink"
	"github.com/metaroce/metaroce/transport"
)

// Path entropy on the UDP backend. The link sends from a pool of source
// ports, one socket each (dataplane/udplink, "Path entropy"), taken from the
// transport's configured entropy range; the transport is then told to pick
// its entropy values from exactly the ports the link bound, so every value
// it picks is one the link sends from.

// udpSrcPorts is the size of a UDP link's source-port pool, the most the
// link allows (one per path at the transport's limit of 256). The pool is a
// fixed sample of the fabric's hash: 64 ports put 16 +- 3.5 on each of 4
// spines (measured once: 12, 14, 22 and 16), 256 put 64 +- 7 (25 +- 2.7%),
// so the spread then hangs on the paths' own draws, as on AF_XDP. A bigger
// pool costs nothing per batch: a batch makes one sendmmsg per port it
// touches, and it touches at most one per path that has data in it.
const udpSrcPorts = 256

// udpSrcPortConfig fills in the source-port pool of a UDP link's config
// from the transport configuration tc: udpSrcPorts ports (fewer if the range
// is smaller) from tc's entropy range.
func udpSrcPortConfig(c *udplink.Config, tc transport.Config) {
	lo, hi := tc.EntropyMin, tc.EntropyMax
	if lo == 0 && hi == 0 {
		lo, hi = transport.Defaults.EntropyMin, transport.Defaults.EntropyMax
	}
	c.SrcPortMin, c.SrcPortMax = lo, hi
	c.SrcPorts = 0
	if lo >= 1 && lo <= hi {
		c.SrcPorts = min(udpSrcPorts, int(hi-lo)+1)
	}
}

// udpEntropy narrows tc's entropy range to the ports ul sends from.
func udpEntropy(tc *transport.Config, ul *udplink.Link) {
	if lo, hi, ok := ul.SrcPortRange(); ok {
		tc.EntropyMin, tc.EntropyMax = lo, hi
	}
}
