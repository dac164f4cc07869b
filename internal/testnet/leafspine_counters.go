package testnet

import (
	"encoding/json"
	"fmt"
	"strings"
)

// SpineCount is what one spine forwarded, from its nft counters.
type SpineCount struct {
	// Packets and Bytes the spine forwarded, both directions.
	Packets, Bytes uint64
	// ToLeaf[l] is the packets it forwarded out of its port to leaf l.
	ToLeaf [2]uint64
}

// Sub returns c minus an earlier reading.
func (c SpineCount) Sub(earlier SpineCount) SpineCount {
	return SpineCount{Packets: c.Packets - earlier.Packets, Bytes: c.Bytes - earlier.Bytes,
		ToLeaf: [2]uint64{c.ToLeaf[0] - earlier.ToLeaf[0], c.ToLeaf[1] - earlier.ToLeaf[1]}}
}

// installCounters adds the spine's counting chain: one counter per port,
// matched on the output interface, in a forward-hook chain that runs after
// the Switch's drop chain (priority 0). Forwarded IP packets only: ARP,
// neighbour discovery and the spine's own traffic are not counted, so a
// blackholed spine reads exactly zero.
func (sp *Spine) installCounters() error {
	var b strings.Builder
	fmt.Fprintf(&b, "add table inet %s\n", spineTable)
	fmt.Fprintf(&b, "add chain inet %s %s { type filter hook forward priority 100; policy accept; }\n", spineTable, spineChain)
	for l, p := range sp.Ports {
		fmt.Fprintf(&b, "add rule inet %s %s oifname %q counter comment \"leaf%d\"\n", spineTable, spineChain, p.Name, l)
	}
	_, err := runInput([]byte(b.String()), "ip", "netns", "exec", sp.Name, "nft", "-f", "-")
	return err
}

// Count reads the spine's counters (one nft process).
func (sp *Spine) Count() (SpineCount, error) {
	var c SpineCount
	out, err := sp.Run("nft", "-j", "list", "chain", "inet", spineTable, spineChain)
	if err != nil {
		return c, err
	}
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Comment string                       `json:"comment"`
				Expr    []map[string]json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return c, fmt.Errorf("testnet: parse nft -j output of %s: %w", sp.Name, err)
	}
	for _, it := range doc.Nftables {
		if it.Rule == nil {
			continue
		}
		var l int
		if _, err := fmt.Sscanf(it.Rule.Comment, "leaf%d", &l); err != nil || l < 0 || l > 1 {
			continue
		}
		for _, e := range it.Rule.Expr {
			raw, ok := e["counter"]
			if !ok {
				continue
			}
			var ctr struct {
				Packets uint64 `json:"packets"`
				Bytes   uint64 `json:"bytes"`
			}
			if err := json.Unmarshal(raw, &ctr); err != nil {
				return c, fmt.Errorf("testnet: parse nft counter of %s: %w", sp.Name, err)
			}
			c.Packets += ctr.Packets
			c.Bytes += ctr.Bytes
			c.ToLeaf[l] += ctr.Packets
		}
	}
	return c, nil
}

// SpineCounts reads every spine's counters, indexed like Spines.
func (f *LeafSpine) SpineCounts() ([]SpineCount, error) {
	cs := make([]SpineCount, len(f.Spines))
	for i, sp := range f.Spines {
		c, err := sp.Count()
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	return cs, nil
}
