package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane/xsk"
)

// IfaceConfig describes an interface to run MetaRoCE on.
type IfaceConfig struct {
	Name   string
	Queues []uint32 // default [0]
	// Local is the address to use; default the interface's first global
	// unicast address of Family.
	Local netip.Addr
	IPv6  bool // which family to pick when Local is unset
	Port  uint16
	// MTU is the IP MTU MetaRoCE runs at (the transport's): 0 means the
	// interface's own. Above the interface's MTU, OpenIface refuses.
	MTU  int
	Mode bpf.Mode
	XSK  xsk.Config
	// DSCP for data and control packets.
	DSCPData, DSCPControl uint8
}

// Iface is an interface in use: the steering program attached through
// bpf_link (so a crash detaches it), one Link per queue, and the
// neighbour resolver they share.
type Iface struct {
	Links      []*Link
	Program    *bpf.Program
	Attachment bpf.Attachment
	Resolver   *Resolver
	Local      netip.Addr
	nl         *netlink.Handle
}

// OpenIface sets an interface up for AF_XDP. It must run on a thread in
// the interface's network namespace; what it returns works from any.
func OpenIface(cfg IfaceConfig) (_ *Iface, err error) {
	if len(cfg.Queues) == 0 {
		cfg.Queues = []uint32{0}
	}
	ifi, err := net.InterfaceByName(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("afxdp: %s has no Ethernet address", cfg.Name)
	}
	if !cfg.Local.IsValid() {
		cfg.Local, err = InterfaceAddr(ifi, cfg.IPv6)
		if err != nil {
			return nil, err
		}
	}
	nl, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("afxdp: netlink: %w", err)
	}
	fi := &Iface{nl: nl, Local: cfg.Local}
	defer func() {
		if err != nil {
			fi.Close()
		}
	}()
	if cfg.MTU == 0 {
		cfg.MTU = ifi.MTU
	}
	if cfg.MTU > ifi.MTU {
		return nil, fmt.Errorf("afxdp: %s: MTU %d is below the %d MetaRoCE is to run at", cfg.Name, ifi.MTU, cfg.MTU)
	}
	// Above SingleBufferMTU, the frags variant: the plain one cannot attach
	// natively (and could not see a frame that spans buffers); its sockets
	// then take chains (XDP_USE_SG) even if MetaRoCE's own packets are
	// smaller.
	frags := ifi.MTU > SingleBufferMTU || cfg.MTU > SingleBufferMTU
	if frags {
		cfg.XSK.SG = true
	}
	fi.Program, err = bpf.Load(bpf.Options{Port: cfg.Port, Frags: frags})
	if err != nil {
		return nil, err
	}
	fi.Attachment, err = fi.Program.Attach(ifi.Index, cfg.Mode)
	if err != nil {
		return nil, err
	}
	fi.Resolver = NewResolver(nl, ifi.Index)
	var mac [6]byte
	copy(mac[:], ifi.HardwareAddr)
	for _, q := range cfg.Queues {
		l, err := Open(Config{Ifindex: ifi.Index, Ifname: cfg.Name, Queue: q, Local: cfg.Local, LocalMAC: mac,
			Port: cfg.Port, MTU: cfg.MTU, DSCPData: cfg.DSCPData, DSCPControl: cfg.DSCPControl, XSK: cfg.XSK,
			XDPMode: fi.Attachment.Mode.String()}, fi.Resolver)
		if err != nil {
			return nil, err
		}
		fi.Links = append(fi.Links, l)
		if fi.Attachment.NativeErr != nil {
			l.info.Why += "; generic XDP: native attach failed: " + fi.Attachment.NativeErr.Error()
		}
		if err := fi.Program.SetSocket(q, l.FD()); err != nil {
			return nil, err
		}
	}
	return fi, nil
}

// InterfaceAddr returns ifi's first global unicast address of the family
// v6 selects: the address a backend binds when none is configured.
func InterfaceAddr(ifi *net.Interface, v6 bool) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.Is6() == v6 && ip.IsGlobalUnicast() {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("afxdp: %s has no global unicast %s address", ifi.Name, map[bool]string{false: "IPv4", true: "IPv6"}[v6])
}

// Close detaches the program (only ours: the bpf_link we made), closes the
// sockets and stops the resolver.
func (fi *Iface) Close() error {
	var errs []error
	for _, l := range fi.Links {
		errs = append(errs, l.Close())
	}
	if fi.Resolver != nil {
		fi.Resolver.Close()
	}
	if fi.Program != nil {
		errs = append(errs, fi.Program.Close())
	}
	if fi.nl != nil {
		fi.nl.Close()
	}
	return errors.Join(errs...)
}
