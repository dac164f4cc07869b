// Package frame encodes and decodes the encapsulation of MetaRoCE packets:
// Ethernet II, then IPv4 or IPv6, then UDP. The MetaRoCE transport header
// and its payload are the UDP payload, opaque to this package.
//
// # Why it is written by hand
//
// It runs once per packet on the engine goroutines, where nothing may
// allocate. gopacket is general: its decoders go through interfaces into
// layer structs and allocate on the common path, and its serializer does
// too, which is the wrong cost for three headers whose layout we fix.
// gVisor's pkg/tcpip/header has the right shape (typed views over []byte)
// but cannot be imported without pulling in gVisor. The three headers are
// little enough code to own.
//
// # Layout
//
// A frame Build writes has no VLAN tag and no IP options, so the offsets
// are fixed by the address family:
//
//	            IPv4   IPv6
//	Ethernet       0      0   dst MAC, src MAC, EtherType (14 bytes)
//	IP            14     14   20 or 40 bytes
//	UDP           34     54   8 bytes
//	payload       42     62   HeaderLen4, HeaderLen6
//
// The dataplane writes the transport packet into a UMEM chunk at a fixed
// offset, then calls Build to put the headers in front of it and Finish to
// fill the checksums once the payload is final. Writing every packet at
// MaxHeaderLen and starting the Ethernet frame MaxHeaderLen-HeaderLen(is6)
// bytes in gives both families one layout.
//
// # What Build writes
//
// DSCP and ECN as given; TTL (hop limit) 64; on IPv4, DF set, ID 0 (an
// atomic datagram in the sense of RFC 6864) and no options; on IPv6, flow
// label 0, since the ECMP entropy is the UDP source port. No padding to the
// 60-byte Ethernet minimum: NICs pad short frames on transmit, and a
// MetaRoCE packet is never that short anyway.
//
// # What Parse validates, and what it does not
//
// Parse accepts one 802.1Q VLAN tag and reports its TCI; a second tag
// (QinQ) or an 802.1ad tag is ErrNotIP. It honours the IPv4 IHL, skipping
// any options without interpreting them, and rejects IPv4 fragments. It
// does not walk IPv6 extension headers: the next header must be UDP,
// otherwise ErrNotUDP, which also covers IPv6 fragments. Lengths bound the
// payload from the inside out: the frame bounds the IP packet, the IP
// length bounds the UDP datagram, and the UDP length bounds the payload,
// so Ethernet padding (and anything else past the IP length) never reaches
// the transport. A UDP length shorter than the IP payload is accepted and
// the difference ignored, as Linux does.
//
// Parse does not judge addresses (martians, multicast, the MAC being ours),
// ports, TTL, the IPv4 DF and reserved bits or ID, or the IPv6 flow label:
// steering and policy belong to the XDP program and the engine.
//
// # Checksums
//
// Sum is the RFC 1071 ones-complement sum, taken over wide words with no
// per-16-bit work (Sum's comment has the mechanism). Finish
// computes the IPv4 header checksum and the UDP checksum on both families:
// on IPv4 a zero UDP checksum is legal, but the transport's CRC does not
// cover the UDP ports, and the UDP checksum does.
//
// Parse always verifies the IPv4 header checksum. It verifies the UDP
// checksum when it is nonzero on IPv4, and always on IPv6, where zero is
// forbidden (RFC 8200 section 8.1), unless Parser.SkipUDPChecksum is set.
// That switch exists for copy-mode AF_XDP on veth: a frame the peer's
// kernel stack sent can arrive in the CHECKSUM_PARTIAL state, with only the
// pseudo-header sum in its UDP checksum field, because the stack left the
// rest to a checksum offload that never ran (turning off TX checksum
// offload on the peer, "ethtool -K DEV tx off", avoids it). Frames from
// Build always carry complete checksums, so a MetaRoCE-to-MetaRoCE path
// needs no switch.
//
// # Errors
//
// Parse reports a rejected frame as a Reason, an error that is also a small
// integer, so the hot path counts drops in an array indexed by reason with
// no allocation and no logging; Reason.Name gives the metrics label. Build
// and Finish report caller mistakes with ordinary sentinel errors.
package frame
