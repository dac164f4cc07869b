package testnet

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// nftTable and nftChain hold the switch's drop rules. The chain is not called
// "fwd": that is an nft keyword.
const (
	nftTable = "mrtn"
	nftChain = "lossy"
)

// Switch is a namespace that routes between its ports and can impair them.
type Switch struct {
	*Namespace
	// Ports are the switch-side ends of the links, in the order added.
	Ports []*Endpoint

	mu       sync.Mutex
	loss     int            // permille for every forwarded packet
	portLoss map[string]int // permille for packets forwarded out of a port
}

// NewSwitch turns ns into a switch: forwarding on, L4 multipath hashing, and
// an empty nftables forward chain for drop rules.
func NewSwitch(ns *Namespace) (*Switch, error) {
	if err := ns.EnableForwarding(); err != nil {
		return nil, err
	}
	s := &Switch{Namespace: ns, portLoss: map[string]int{}}
	if err := s.apply(); err != nil {
		return nil, err
	}
	return s, nil
}

// AddPort records e (an end in the switch's namespace) as the next port.
func (s *Switch) AddPort(e *Endpoint) error {
	if e.NS != s.Namespace {
		return fmt.Errorf("testnet: %s is not in switch %s", e, s.Name)
	}
	s.mu.Lock()
	s.Ports = append(s.Ports, e)
	s.mu.Unlock()
	return nil
}

// SetLoss drops fraction (0 to 1, resolution 0.001) of every packet the switch
// forwards, at random (nft numgen random mod 1000 < N). 0 removes the rule.
// Packets offered to the forward hook are skbs: with veth offloads on, one
// may be a 64 KB GSO super-packet (see LinkConfig.NoOffloads).
func (s *Switch) SetLoss(fraction float64) error {
	pm, err := permille(fraction)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.loss = pm
	s.mu.Unlock()
	return s.apply()
}

// SetPortLoss drops fraction of the packets forwarded out of port i (towards
// host i of a star). It compounds with SetLoss. 0 removes the rule.
func (s *Switch) SetPortLoss(i int, fraction float64) error {
	pm, err := permille(fraction)
	if err != nil {
		return err
	}
	p, err := s.port(i)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if pm == 0 {
		delete(s.portLoss, p.Name)
	} else {
		s.portLoss[p.Name] = pm
	}
	s.mu.Unlock()
	return s.apply()
}

// Cut takes the link of port i down; Restore brings it back.
func (s *Switch) Cut(i int) error {
	p, err := s.port(i)
	if err != nil {
		return err
	}
	return p.Link.Cut()
}

// Restore brings the link of port i back up, with its routes.
func (s *Switch) Restore(i int) error {
	p, err := s.port(i)
	if err != nil {
		return err
	}
	return p.Link.Restore()
}

// SetRate limits what the switch sends out of port i (towards host i).
func (s *Switch) SetRate(i int, bitsPerSec uint64, burst int) error {
	p, err := s.port(i)
	if err != nil {
		return err
	}
	return p.SetRate(bitsPerSec, burst)
}

// ClearRate removes the rate limit of port i.
func (s *Switch) ClearRate(i int) error {
	p, err := s.port(i)
	if err != nil {
		return err
	}
	return p.ClearRate()
}

// Dropped returns how many packets the drop rules have dropped since they
// were last changed (the rules' nft counters).
func (s *Switch) Dropped() (uint64, error) {
	out, err := s.Run("nft", "-j", "list", "chain", "inet", nftTable, nftChain)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Expr []map[string]json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return 0, fmt.Errorf("testnet: parse nft -j output: %w", err)
	}
	var n uint64
	for _, it := range doc.Nftables {
		if it.Rule == nil {
			continue
		}
		for _, e := range it.Rule.Expr {
			raw, ok := e["counter"]
			if !ok {
				continue
			}
			var c struct {
				Packets uint64 `json:"packets"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return 0, fmt.Errorf("testnet: parse nft counter: %w", err)
			}
			n += c.Packets
		}
	}
	return n, nil
}

func (s *Switch) port(i int) (*Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.Ports) {
		return nil, fmt.Errorf("testnet: switch %s has no port %d", s.Name, i)
	}
	return s.Ports[i], nil
}

// apply replaces the drop chain's rules in one nft transaction.
func (s *Switch) apply() error {
	s.mu.Lock()
	var b strings.Builder
	fmt.Fprintf(&b, "add table inet %s\n", nftTable)
	fmt.Fprintf(&b, "add chain inet %s %s { type filter hook forward priority 0; policy accept; }\n", nftTable, nftChain)
	fmt.Fprintf(&b, "flush chain inet %s %s\n", nftTable, nftChain)
	names := make([]string, 0, len(s.portLoss))
	for name := range s.portLoss {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "add rule inet %s %s oifname %q %s\n", nftTable, nftChain, name, dropExpr(s.portLoss[name]))
	}
	if s.loss > 0 {
		fmt.Fprintf(&b, "add rule inet %s %s %s\n", nftTable, nftChain, dropExpr(s.loss))
	}
	s.mu.Unlock()
	_, err := runInput([]byte(b.String()), "ip", "netns", "exec", s.Name, "nft", "-f", "-")
	return err
}

// dropExpr drops pm packets in 1000 at random; 1000 drops all (numgen's
// range is 0-999, so "< 1000" would be rejected).
func dropExpr(pm int) string {
	if pm >= 1000 {
		return "counter drop"
	}
	return fmt.Sprintf("numgen random mod 1000 < %d counter drop", pm)
}

func permille(fraction float64) (int, error) {
	if math.IsNaN(fraction) || fraction < 0 || fraction > 1 {
		return 0, fmt.Errorf("testnet: loss fraction %v is not within [0, 1]", fraction)
	}
	return int(math.Round(fraction * 1000)), nil
}
