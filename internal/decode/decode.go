// Package decode reads a packet capture of MetaRoCE traffic and says what
// is in it: `metaroce decode FILE` (docs/operate.md).
//
// Each MetaRoCE packet (UDP to or from the port, 4792 by default, spec
// §2.2) is dissected with the project's own codecs: wire/frame for the
// Ethernet, IP and UDP headers, wire.Parse for the verdict a receiver
// would reach (the drop reasons of spec §3.5), and wire's views for the
// fields. Its fields carry the names and text forms of the Wireshark
// dissector in deploy/wireshark/metaroce.lua, so a test can ask tshark and
// this package about the same capture and compare them field by field.
//
// The summary is per connection. Connections are identified as the spec
// identifies them (§1.5, §7.6): each end picks an id, every packet names
// its receiver's (DstConn), and the conn packets that name both ends
// (ACCEPT, DISCONNECT, DISCONNECT_ACK) join the two ends into one
// connection. Per direction: packets per opcode, the distinct entropy
// values (UDP source ports, §2.3), per-path transmissions,
// retransmissions, probes, path-sequence gaps (loss before the capture
// point) and transmissions the receiver's SACKs report missing (loss
// after it), NACKs by reason, and the round trip from the capture point
// (an ack matched to the transmission it names by PathID and PathAckSeq,
// and whose Timestamp it echoes, less its AckDelay); and the connection's
// handshake timeline.
//
// # Why not gopacket's pcapgo
//
// The capture formats are read by this package's own reader (pcap.go):
// classic pcap in either byte order with micro- or nanosecond stamps, and
// pcapng's section, interface, enhanced and simple packet blocks, for
// Ethernet, Linux cooked (tcpdump -i any) and raw-IP link types.
// github.com/google/gopacket's pcapgo would do, but it is not in the
// module's dependency set, and it comes with gopacket's whole layer
// machinery for a job that takes two hundred lines here, where the
// headers themselves are already parsed by wire/frame. The reader bounds
// every length it reads before allocating, and FuzzReader holds it to
// that.
package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/wire"
	"github.com/metaroce/metaroce/wire/frame"
)

// Decode reads a capture and returns its MetaRoCE packets and summary.
func Decode(r io.Reader, port uint16) (*Summary, []*Packet, error) {
	return decode(r, port, true)
}

// decode is Decode; without fields it keeps of each packet only what the
// summary reads (its fixed header), so a capture of a whole benchmark
// fits in memory.
func decode(r io.Reader, port uint16, fields bool) (*Summary, []*Packet, error) {
	pr, err := NewReader(r)
	if err != nil {
		return nil, nil, err
	}
	s := &Summary{Drops: map[string]int{}}
	var pkts []*Packet
	var f frame.Frame
	var scratch []byte // for cooked and raw-IP captures, made on first use
	var t0 time.Time
	for {
		rec, err := pr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("record %d: %w", s.Records+1, err)
		}
		s.Records++
		if s.Records == 1 {
			t0 = rec.Time
		}
		if rec.LinkType != linkEthernet && scratch == nil {
			scratch = make([]byte, maxRecord+14)
		}
		if rec.OrigLen > len(rec.Data) {
			// Cut by the capture's snap length: the CRC32C, the last
			// four bytes, is gone, and frame.Parse wants whole packets.
			s.Truncated++
			continue
		}
		p, ok := packetOf(rec, s.Records, port, scratch, &f)
		if !ok {
			s.Other++
			continue
		}
		s.Packets++
		if !fields {
			p.Fields = nil
			// The summary reads headers only: keep the largest fixed
			// header a packet can have (an ack's or a conn packet's,
			// whose 84 bytes outgrew the ack's 80 when tokens came).
			p.b = bytes.Clone(p.b[:min(len(p.b), max(wire.AckLen, wire.ConnLen, wire.DataLen)+wire.TrailerLen)])
		}
		if p.Drop != "" {
			s.Drops[p.Drop]++
		}
		pkts = append(pkts, p)
	}
	if len(s.Drops) == 0 {
		s.Drops = nil
	}
	summarize(s, pkts, t0)
	return s, pkts, nil
}

// Run is `metaroce decode [flags] FILE`.
func Run(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce decode", out)
	jsonOut := fs.Bool("json", false, "print the summary (and with -packets every packet) as JSON")
	packets := fs.Bool("packets", false, "list every MetaRoCE packet with its fields before the summary")
	port := fs.Int("port", wire.DefaultPort, "the MetaRoCE UDP port of the capture (spec §2.2)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: metaroce decode [flags] FILE.pcap\n\n"+
			"Decodes the MetaRoCE packets of a pcap or pcapng capture (tcpdump -w, tshark -w) with\n"+
			"the project's codecs and summarises each connection: packets per opcode, entropy\n"+
			"values, per-path loss and retransmissions, RTT, handshake timeline.\n\nflags:\n")
		fs.PrintDefaults()
	}
	flagArgs, files := splitArgs(fs, args)
	if err := cli.Parse(fs, flagArgs); err != nil {
		return err
	}
	if err := cli.Check(cli.Int("port", *port, 1, 65535)); err != nil {
		return err
	}
	if len(files) != 1 {
		return cli.UsageError("want one capture file (see metaroce decode -h), got %d", len(files))
	}
	name := files[0]
	fh, err := os.Open(name)
	if err != nil {
		return err // *PathError names the file
	}
	defer fh.Close()
	s, pkts, err := decode(fh, uint16(*port), *packets)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s.File = name
	if *packets {
		s.PacketList = pkts
	}
	if *jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	return writeText(out, s, pkts, *packets)
}

// splitArgs separates the file names from the flags, so the file may come
// before or after them (cli.Parse refuses positional arguments).
func splitArgs(fs *flag.FlagSet, args []string) (flags, files []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			files = append(files, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			files = append(files, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				if i+1 < len(args) {
					flags = append(flags, args[i+1])
					i++
				}
			}
		}
	}
	return flags, files
}

func writeText(out io.Writer, s *Summary, pkts []*Packet, list bool) error {
	w := &errWriter{w: out}
	var t0 time.Time
	if len(pkts) > 0 {
		t0 = pkts[0].Time
	}
	if list {
		for _, p := range pkts {
			w.printf("%s\n", p.Line(t0))
		}
		w.printf("\n")
	}
	w.printf("%s: %d records, %d MetaRoCE packets, %d other\n", s.File, s.Records, s.Packets, s.Other)
	if s.Truncated > 0 {
		w.printf("warning: %d records cut by the capture's snap length were skipped: capture with -s 0\n", s.Truncated)
	}
	if len(s.Drops) > 0 {
		w.printf("dropped by a receiver (spec §3.5): %s\n", countList(s.Drops))
	}
	for _, c := range s.Connections {
		w.printf("\nconnection A=%s B=%s\n", c.A, c.B)
		for _, d := range c.Directions {
			dir := "A>B"
			if d.From != c.A {
				dir = "B>A"
			}
			w.printf("  %s %s\n", dir, countList(d.Opcodes))
			w.printf("    entropy: %d source ports (%d on data)", len(d.Entropy), d.DataEntropy)
			if len(d.Entropy) <= 8 {
				w.printf(" %v", d.Entropy)
			}
			w.printf("\n")
			if d.Transmits > 0 {
				w.printf("    data: %d transmissions, %d retransmissions, %d PSNs\n", d.Transmits, d.Retransmits, d.PSNs)
			}
			if len(d.Nacks) > 0 {
				w.printf("    NACKs received: %s\n", countList(d.Nacks))
			}
			if d.RTT != nil {
				w.printf("    rtt from the capture point: min %.1f us, p50 %.1f us, max %.1f us (%d samples)\n",
					d.RTT.MinUs, d.RTT.P50Us, d.RTT.MaxUs, d.RTT.Samples)
			}
			if t := d.Stamps; t != nil {
				w.printf("    timestamps: %d distinct, up to %d transmissions share one (captured over %.1f us at most); lag behind the fastest p50 %.1f us, p99 %.1f us, max %.1f us\n",
					t.Distinct, t.MaxShare, t.SpreadMaxUs, t.LagP50Us, t.LagP99Us, t.LagMaxUs)
				w.printf("    ack delay: %d of %d matched acks claim more than the capture allows (by up to %.1f us)\n",
					t.AckDelayOver, t.Acks, t.AckDelayOverMaxUs)
			}
			if len(d.Paths) > 0 {
				w.printf("    %-5s %8s %6s %6s %6s %6s %6s\n", "path", "transmit", "retx", "probes", "gaps", "lost", "acks")
				for _, p := range d.Paths {
					w.printf("    %-5d %8d %6d %6d %6d %6d %6d\n", p.PathID, p.Transmits, p.Retransmits, p.Probes, p.Gaps, p.Lost, p.Acks)
				}
			}
		}
		if len(c.Handshake) > 0 {
			w.printf("  timeline:\n")
			for _, e := range c.Handshake {
				w.printf("    %10.6f #%-6d %s %-14s %s\n", e.T, e.Frame, e.From, e.Opcode, e.Detail)
			}
		}
	}
	return w.err
}

func countList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
