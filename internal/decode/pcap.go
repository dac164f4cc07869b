package decode

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"time"
)

// Link types (https://www.tcpdump.org/linktypes.html) the reader turns into
// Ethernet frames for wire/frame: Ethernet itself, Linux cooked captures
// (tcpdump -i any) and raw IP.
const (
	linkEthernet = 1
	linkRaw      = 101
	linkSLL      = 113
	linkIPv4     = 228
	linkIPv6     = 229
	linkSLL2     = 276
)

// maxRecord bounds one captured packet: larger than any frame (a 64 KiB
// UDP datagram in a jumbo-less capture is impossible, but snaplens of
// 262144 are common), small enough that a corrupt length cannot make the
// reader allocate gigabytes.
const maxRecord = 1 << 18

// ErrFormat marks a file that is neither pcap nor pcapng, or is corrupt.
var ErrFormat = errors.New("not a pcap or pcapng file")

// Record is one captured packet. Data aliases the reader's buffer and is
// valid until the next call to Next.
type Record struct {
	Time     time.Time
	LinkType uint16
	Data     []byte
	OrigLen  int
}

// Reader reads pcap (microsecond or nanosecond, either byte order) and
// pcapng files (section header, interface description, enhanced and
// simple packet blocks; other blocks skipped).
type Reader struct {
	r    *bufio.Reader
	ng   bool
	bo   binary.ByteOrder
	link uint16 // pcap: the file's link type
	nano bool   // pcap: nanosecond timestamps
	// pcapng: per interface of the current section, link type and
	// timestamp resolution in units per second.
	ifs []ngIface
	buf []byte
}

type ngIface struct {
	link uint16
	res  uint64 // timestamp units per second
}

// NewReader reads the file header and returns a reader positioned at the
// first packet.
func NewReader(r io.Reader) (*Reader, error) {
	pr := &Reader{r: bufio.NewReaderSize(r, 1<<16)}
	var hdr [24]byte
	if _, err := io.ReadFull(pr.r, hdr[:4]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	switch m := binary.LittleEndian.Uint32(hdr[:4]); m {
	case 0xa1b2c3d4, 0xa1b23c4d:
		pr.bo, pr.nano = binary.LittleEndian, m == 0xa1b23c4d
	case 0xd4c3b2a1, 0x4d3cb2a1:
		pr.bo, pr.nano = binary.BigEndian, m == 0x4d3cb2a1
	case 0x0a0d0d0a:
		pr.ng = true
		if err := pr.readSHB(); err != nil {
			return nil, err
		}
		return pr, nil
	default:
		return nil, fmt.Errorf("%w: magic %08x", ErrFormat, m)
	}
	if _, err := io.ReadFull(pr.r, hdr[4:]); err != nil {
		return nil, fmt.Errorf("%w: short file header", ErrFormat)
	}
	pr.link = uint16(pr.bo.Uint32(hdr[20:]))
	return pr, nil
}

// Next returns the next packet, or io.EOF after the last one.
func (pr *Reader) Next() (Record, error) {
	if pr.ng {
		return pr.nextNG()
	}
	var h [16]byte
	if _, err := io.ReadFull(pr.r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Record{}, fmt.Errorf("%w: truncated record header", ErrFormat)
		}
		return Record{}, err
	}
	sec, frac := pr.bo.Uint32(h[0:]), pr.bo.Uint32(h[4:])
	incl, orig := pr.bo.Uint32(h[8:]), pr.bo.Uint32(h[12:])
	if incl > maxRecord {
		return Record{}, fmt.Errorf("%w: record of %d bytes", ErrFormat, incl)
	}
	data, err := pr.read(int(incl))
	if err != nil {
		return Record{}, err
	}
	ns := int64(frac) * 1000
	if pr.nano {
		ns = int64(frac)
	}
	return Record{Time: time.Unix(int64(sec), ns).UTC(), LinkType: pr.link, Data: data, OrigLen: int(orig)}, nil
}

func (pr *Reader) read(n int) ([]byte, error) {
	if cap(pr.buf) < n {
		pr.buf = make([]byte, n)
	}
	b := pr.buf[:n]
	if _, err := io.ReadFull(pr.r, b); err != nil {
		return nil, fmt.Errorf("%w: truncated record", ErrFormat)
	}
	return b, nil
}

// readSHB reads the rest of a section header block whose type has been
// read, setting the byte order and forgetting the previous section's
// interfaces.
func (pr *Reader) readSHB() error {
	var h [8]byte
	if _, err := io.ReadFull(pr.r, h[:]); err != nil {
		return fmt.Errorf("%w: short section header", ErrFormat)
	}
	switch binary.LittleEndian.Uint32(h[4:]) {
	case 0x1a2b3c4d:
		pr.bo = binary.LittleEndian
	case 0x4d3c2b1a:
		pr.bo = binary.BigEndian
	default:
		return fmt.Errorf("%w: bad pcapng byte-order magic", ErrFormat)
	}
	total := pr.bo.Uint32(h[:4])
	if total < 28 || total%4 != 0 || total > maxRecord {
		return fmt.Errorf("%w: section header of %d bytes", ErrFormat, total)
	}
	if _, err := pr.read(int(total) - 12); err != nil {
		return err
	}
	pr.ifs = pr.ifs[:0]
	return nil
}

func (pr *Reader) nextNG() (Record, error) {
	for {
		var h [8]byte
		if _, err := io.ReadFull(pr.r, h[:4]); err != nil {
			if err == io.ErrUnexpectedEOF {
				return Record{}, fmt.Errorf("%w: truncated block", ErrFormat)
			}
			return Record{}, err
		}
		if binary.LittleEndian.Uint32(h[:4]) == 0x0a0d0d0a {
			if err := pr.readSHB(); err != nil {
				return Record{}, err
			}
			continue
		}
		if _, err := io.ReadFull(pr.r, h[4:]); err != nil {
			return Record{}, fmt.Errorf("%w: truncated block", ErrFormat)
		}
		typ, total := pr.bo.Uint32(h[:4]), pr.bo.Uint32(h[4:])
		if total < 12 || total%4 != 0 || total > maxRecord {
			return Record{}, fmt.Errorf("%w: block of %d bytes", ErrFormat, total)
		}
		body, err := pr.read(int(total) - 8)
		if err != nil {
			return Record{}, err
		}
		body = body[:len(body)-4] // the trailing copy of the length
		switch typ {
		case 1: // interface description
			if len(body) < 8 {
				return Record{}, fmt.Errorf("%w: short interface block", ErrFormat)
			}
			pr.ifs = append(pr.ifs, ngIface{link: pr.bo.Uint16(body), res: pr.tsresol(body[8:])})
		case 6: // enhanced packet
			if len(body) < 20 {
				return Record{}, fmt.Errorf("%w: short packet block", ErrFormat)
			}
			id := pr.bo.Uint32(body)
			if int(id) >= len(pr.ifs) {
				return Record{}, fmt.Errorf("%w: packet on undeclared interface %d", ErrFormat, id)
			}
			ts := uint64(pr.bo.Uint32(body[4:]))<<32 | uint64(pr.bo.Uint32(body[8:]))
			capLen, orig := pr.bo.Uint32(body[12:]), pr.bo.Uint32(body[16:])
			if uint64(capLen) > uint64(len(body)-20) {
				return Record{}, fmt.Errorf("%w: packet longer than its block", ErrFormat)
			}
			ifc := pr.ifs[id]
			sec, rem := ts/ifc.res, ts%ifc.res
			hi, lo := bits.Mul64(rem, 1e9) // rem < res, so hi < res: no overflow
			ns, _ := bits.Div64(hi, lo, ifc.res)
			t := time.Unix(int64(sec), int64(ns)).UTC()
			return Record{Time: t, LinkType: ifc.link, Data: body[20 : 20+capLen], OrigLen: int(orig)}, nil
		case 3: // simple packet: no timestamp, interface 0
			if len(body) < 4 || len(pr.ifs) == 0 {
				return Record{}, fmt.Errorf("%w: bad simple packet block", ErrFormat)
			}
			orig := pr.bo.Uint32(body)
			data := body[4:]
			if uint64(orig) < uint64(len(data)) {
				data = data[:orig]
			}
			return Record{LinkType: pr.ifs[0].link, Data: data, OrigLen: int(orig)}, nil
		}
	}
}

// tsresol reads if_tsresol (option 9) from an interface block's options;
// the default is microseconds.
func (pr *Reader) tsresol(opts []byte) uint64 {
	for len(opts) >= 4 {
		code, n := pr.bo.Uint16(opts), int(pr.bo.Uint16(opts[2:]))
		opts = opts[4:]
		if code == 0 || n > len(opts) {
			break
		}
		if code == 9 && n >= 1 {
			v := opts[0]
			exp := uint64(v & 0x7f)
			base := uint64(10)
			if v&0x80 != 0 {
				base = 2
			}
			if (base == 10 && exp <= 19) || (base == 2 && exp <= 63) {
				r := uint64(1)
				for range exp {
					r *= base
				}
				if r > 0 {
					return r
				}
			}
		}
		opts = opts[min((n+3)&^3, len(opts)):]
	}
	return 1_000_000
}

// Writer writes a classic pcap file of Ethernet frames with nanosecond
// timestamps (what the tests hand to tshark).
type Writer struct {
	w io.Writer
}

// NewWriter writes the file header.
func NewWriter(w io.Writer) (*Writer, error) {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b23c4d)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], maxRecord)
	binary.LittleEndian.PutUint32(h[20:], linkEthernet)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w}, nil
}

// WritePacket writes one frame captured at t.
func (pw *Writer) WritePacket(t time.Time, frame []byte) error {
	if len(frame) > maxRecord {
		return fmt.Errorf("pcap: frame of %d bytes", len(frame))
	}
	var h [16]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(t.Unix()))
	binary.LittleEndian.PutUint32(h[4:], uint32(t.Nanosecond()))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(frame)))
	if _, err := pw.w.Write(h[:]); err != nil {
		return err
	}
	_, err := pw.w.Write(frame)
	return err
}
