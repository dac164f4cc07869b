package afxdp

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Resolver maps destination addresses to the MAC address of their next
// hop from the kernel's own tables (routes and ARP/NDP neighbours, read
// through netlink), so the AF_XDP path never speaks ARP or NDP itself.
//
// Lookup runs on the engine goroutine per packet: it reads an immutable
// map through an atomic pointer (no lock, no allocation). A miss asks the
// resolver goroutine, through a non-blocking channel send, to resolve the
// address; the goroutine makes the kernel resolve it (a neighbour entry
// with NTF_USE, the kernel's own "resolve this" request), and publishes a
// new map. The packet that missed is dropped and counted; the transport
// resends it.
type Resolver struct {
	h       *netlink.Handle
	ifindex int
	table   atomic.Pointer[map[netip.Addr][6]byte]
	want    chan netip.Addr
	stop    chan struct{}
	wg      sync.WaitGroup
	Misses  atomic.Uint64
}

// NewResolver starts a resolver for the interface with index ifindex,
// using h (a netlink handle in the interface's network namespace).
func NewResolver(h *netlink.Handle, ifindex int) *Resolver {
	r := &Resolver{h: h, ifindex: ifindex, want: make(chan netip.Addr, 64), stop: make(chan struct{})}
	empty := map[netip.Addr][6]byte{}
	r.table.Store(&empty)
	r.wg.Add(1)
	go r.loop()
	return r
}

// Lookup returns the next-hop MAC for dst.
func (r *Resolver) Lookup(dst netip.Addr) ([6]byte, bool) {
	m, ok := (*r.table.Load())[dst]
	if !ok {
		r.Misses.Add(1)
		select {
		case r.want <- dst:
		default:
		}
	}
	return m, ok
}

// Close stops the resolver goroutine.
func (r *Resolver) Close() {
	close(r.stop)
	r.wg.Wait()
}

func (r *Resolver) loop() {
	defer r.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	pending := map[netip.Addr]bool{}
	for {
		select {
		case <-r.stop:
			return
		case a := <-r.want:
			pending[a] = true
		case <-tick.C:
			for a := range *r.table.Load() {
				pending[a] = true // refresh: MACs change when neighbours do
			}
		}
		// Drain what else is waiting, then resolve the lot.
		for more := true; more; {
			select {
			case a := <-r.want:
				pending[a] = true
			default:
				more = false
			}
		}
		next := map[netip.Addr][6]byte{}
		for a := range pending {
			mac, err := r.resolve(a)
			if err == nil {
				next[a] = mac
				delete(pending, a)
			}
		}
		if len(next) > 0 || len(*r.table.Load()) > 0 {
			for a, m := range *r.table.Load() {
				if _, ok := next[a]; !ok && !pending[a] {
					next[a] = m
				}
			}
			r.table.Store(&next)
		}
	}
}

// resolve finds dst's next hop through the routing table and returns its
// neighbour entry, asking the kernel to resolve it when there is none.
func (r *Resolver) resolve(dst netip.Addr) ([6]byte, error) {
	var mac [6]byte
	routes, err := r.h.RouteGet(net.IP(dst.AsSlice()))
	if err != nil || len(routes) == 0 {
		return mac, fmt.Errorf("route to %v: %v", dst, err)
	}
	hop := dst
	if gw := routes[0].Gw; gw != nil {
		if a, ok := netip.AddrFromSlice(gw); ok {
			hop = a.Unmap()
		}
	}
	family := netlink.FAMILY_V4
	if hop.Is6() {
		family = netlink.FAMILY_V6
	}
	neighs, err := r.h.NeighList(r.ifindex, family)
	if err != nil {
		return mac, fmt.Errorf("neighbours of %d: %w", r.ifindex, err)
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.Unmap() != hop || len(n.HardwareAddr) != 6 {
			continue
		}
		if n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_PERMANENT|netlink.NUD_DELAY|netlink.NUD_PROBE|netlink.NUD_NOARP) != 0 {
			copy(mac[:], n.HardwareAddr)
			return mac, nil
		}
	}
	// Ask the kernel to resolve it; the next pass finds the entry.
	_ = r.h.NeighSet(&netlink.Neigh{LinkIndex: r.ifindex, Family: family, IP: net.IP(hop.AsSlice()),
		State: netlink.NUD_NONE, Flags: unix.NTF_USE})
	return mac, fmt.Errorf("neighbour %v not resolved yet", hop)
}
