package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/metaroce/metaroce/internal/testnet"
)

// pathEndpoints lists the veth ends between a and b: a's port and its peer,
// b's port's peer and b's port. On a Pair that is two ends (each port is the
// other's peer); on a Star, four (the two switch ports in between). It only
// follows the hosts' own links, so it never names an interface outside the
// caller's Net.
func pathEndpoints(a, b *testnet.Host) []*testnet.Endpoint {
	var eps []*testnet.Endpoint
	for _, e := range []*testnet.Endpoint{a.Port, a.Port.Peer, b.Port.Peer, b.Port} {
		if e != nil && !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	return eps
}

// linkCounters are an interface's drop counters.
type linkCounters struct{ rxDropped, txDropped uint64 }

// readLinkCounters reads the drop counters of e (ip -s link, in e's
// namespace). Cold path.
func readLinkCounters(e *testnet.Endpoint) (linkCounters, error) {
	out, err := e.NS.Run("ip", "-j", "-s", "link", "show", "dev", e.Name)
	if err != nil {
		return linkCounters{}, fmt.Errorf("read counters of %s: %w", e, err)
	}
	var v []struct {
		Stats struct {
			RX struct {
				Dropped uint64 `json:"dropped"`
			} `json:"rx"`
			TX struct {
				Dropped uint64 `json:"dropped"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v) != 1 {
		return linkCounters{}, fmt.Errorf("read counters of %s: unexpected ip output %q", e, out)
	}
	return linkCounters{v[0].Stats.RX.Dropped, v[0].Stats.TX.Dropped}, nil
}

// pathDrops snapshots the drop counters of every end of a path.
type pathDrops struct {
	eps []*testnet.Endpoint
	at  []linkCounters
}

func snapshotDrops(eps []*testnet.Endpoint) (pathDrops, error) {
	p := pathDrops{eps: eps, at: make([]linkCounters, len(eps))}
	var errs []error
	for i, e := range eps {
		var err error
		p.at[i], err = readLinkCounters(e)
		errs = append(errs, err)
	}
	return p, errors.Join(errs...)
}

// since describes the drops counted after p was taken, or "" if none.
func (p pathDrops) since(q pathDrops) string {
	var parts []string
	for i, e := range p.eps {
		if rx := q.at[i].rxDropped - p.at[i].rxDropped; rx > 0 {
			parts = append(parts, fmt.Sprintf("%s rx %d", e, rx))
		}
		if tx := q.at[i].txDropped - p.at[i].txDropped; tx > 0 {
			parts = append(parts, fmt.Sprintf("%s tx %d", e, tx))
		}
	}
	return strings.Join(parts, ", ")
}
