package daemon

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/afxdp"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// checkMTU compares the configured MTU (config key mtu, flag -mtu) with the
// interface's own, read in the daemon's namespace at start. Above it the
// transport's full-size packets could not leave the host (the AF_XDP
// transmit buffers, sized by the interface's limit, would not even hold
// them), so the daemon refuses to start. Below it everything works, at the
// configured size (the interface may carry other traffic at its own), so
// that is only logged; loopback, at 65536, is the common case.
func checkMTU(log *slog.Logger, iface string, mtu int) error {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", iface, err)
	}
	if mtu > ifi.MTU {
		return fmt.Errorf("interface %s: its MTU is %d but the configuration's mtu (-mtu) is %d: "+
			"raise the interface's (ip link set dev %s mtu %d) or lower mtu to %d",
			iface, ifi.MTU, mtu, iface, mtu, ifi.MTU)
	}
	if mtu < ifi.MTU {
		log.Info("interface MTU above the configured mtu: MetaRoCE packets stay at mtu",
			"iface", iface, "iface_mtu", ifi.MTU, "mtu", mtu)
	}
	return nil
}

// checkLinkMTU is the invariant that keeps the transport from writing past
// a transmit buffer: the longest datagram the transport builds at its MTU
// (payload, data header, trailer) must fit in what the link's buffers hold.
func checkLinkMTU(iface string, l dataplane.Link, tc *transport.Config) error {
	var room int
	switch x := l.(type) {
	case *afxdp.Link:
		room = x.MaxPayload()
	case *whyLink:
		room = x.Config().MaxPayload
	default:
		return nil
	}
	if need := tc.MaxPayload() + wire.DataLen + wire.TrailerLen; need > room {
		return fmt.Errorf("interface %s: the transport's %d-byte datagrams at mtu %d do not fit the %s link's %d-byte buffers",
			iface, need, tc.MTU, l.Info().Backend, room)
	}
	return nil
}
