package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/internal/testnet"
)

// The incast demo's Linux TCP contenders: one connection per sender to the
// receiver, opened on threads inside the hosts' namespaces, with the
// sender's congestion control set on its socket (TCP_CONGESTION). A round
// is what metaroce's is: every sender writes its block, drawn from (round,
// sender), at once; the receiver reads and compares it and answers one
// byte; the sender's completion time is from the release to that byte,
// which is the TCP counterpart of a WRITE's completion (the receiver has
// all of it). Timeouts are the senders' namespaces' TcpExt TCPTimeouts
// (/proc/thread-self/net/netstat read inside each), retransmissions the
// sockets' tcpi_total_retrans.

type tcpIncast struct {
	senders []*net.TCPConn
	accept  []*net.TCPConn // the receiver's end, by sender
	blocks  [][]byte
	ln      *net.TCPListener
	size    int
}

// openTCPIncast connects each sender host to recv with congestion control
// cc ("cubic", "bbr").
func openTCPIncast(recv *testnet.Host, senders []*testnet.Host, cc string, size int, port uint16) (_ *tcpIncast, err error) {
	t := &tcpIncast{size: size, accept: make([]*net.TCPConn, len(senders))}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	addr := netip.AddrPortFrom(recv.IPv4, port)
	if err := recv.Do(func() error {
		var err error
		t.ln, err = net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		return nil, err
	}
	accErr := make(chan error, 1)
	go func() {
		for range senders {
			c, err := t.ln.AcceptTCP()
			if err != nil {
				accErr <- err
				return
			}
			var hello [4]byte
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, hello[:]); err != nil {
				accErr <- err
				return
			}
			c.SetReadDeadline(time.Time{})
			i := int(binary.BigEndian.Uint32(hello[:]))
			if i >= len(senders) || t.accept[i] != nil {
				accErr <- fmt.Errorf("bad hello %d", i)
				return
			}
			c.SetNoDelay(true)
			t.accept[i] = c
		}
		accErr <- nil
	}()
	for i, h := range senders {
		var c *net.TCPConn
		err := h.Do(func() error {
			d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				if err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
				}); err != nil {
					return err
				}
				return serr
			}}
			nc, err := d.Dial("tcp4", addr.String())
			if err != nil {
				return err
			}
			c = nc.(*net.TCPConn)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("sender %d: dial with %s: %w", i, cc, err)
		}
		c.SetNoDelay(true)
		t.senders = append(t.senders, c)
		var hello [4]byte
		binary.BigEndian.PutUint32(hello[:], uint32(i))
		if _, err := c.Write(hello[:]); err != nil {
			return nil, err
		}
		t.blocks = append(t.blocks, make([]byte, size))
	}
	if err := <-accErr; err != nil {
		return nil, fmt.Errorf("accept: %w", err)
	}
	return t, nil
}

func (t *tcpIncast) close() {
	for _, c := range append(t.senders, t.accept...) {
		if c != nil {
			c.Close()
		}
	}
	if t.ln != nil {
		t.ln.Close()
	}
}

// round runs one incast round over the connections.
func (t *tcpIncast) round(ctx context.Context, round int) roundResult {
	n := len(t.senders)
	res := roundResult{FCT: make([]time.Duration, n)}
	for i, b := range t.blocks {
		fillBlock(b, round, i)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	fail := func(err error, corrupt bool) {
		mu.Lock()
		defer mu.Unlock()
		if corrupt {
			res.Corrupt++
		} else {
			res.Failed++
		}
		if res.Err == nil {
			res.Err = err
		}
	}
	release := make(chan struct{})
	var t0 time.Time
	for i := range t.senders {
		s, r := t.senders[i], t.accept[i]
		s.SetDeadline(deadline)
		r.SetDeadline(deadline)
		wg.Add(2)
		go func() { // the sender
			defer wg.Done()
			<-release
			if _, err := s.Write(t.blocks[i]); err != nil {
				fail(fmt.Errorf("sender %d: %w", i, err), false)
				return
			}
			var ack [1]byte
			if _, err := io.ReadFull(s, ack[:]); err != nil {
				fail(fmt.Errorf("sender %d: ack: %w", i, err), false)
				return
			}
			end := time.Now()
			mu.Lock()
			res.FCT[i] = end.Sub(t0)
			mu.Unlock()
		}()
		go func() { // the receiver's end
			defer wg.Done()
			buf := make([]byte, t.size)
			if _, err := io.ReadFull(r, buf); err != nil {
				fail(fmt.Errorf("receiver from %d: %w", i, err), true)
				return
			}
			if !bytes.Equal(buf, t.blocks[i]) {
				fail(fmt.Errorf("receiver from %d: data corrupt", i), true)
				return
			}
			mu.Lock()
			res.Verified++
			mu.Unlock()
			if _, err := r.Write([]byte{1}); err != nil {
				fail(fmt.Errorf("receiver to %d: ack: %w", i, err), false)
			}
		}()
	}
	t0 = time.Now()
	close(release)
	wg.Wait()
	return res
}

// retrans is the senders' retransmitted segments (tcpi_total_retrans).
func (t *tcpIncast) retrans() (uint64, error) {
	var n uint64
	for _, c := range t.senders {
		rc, err := c.SyscallConn()
		if err != nil {
			return 0, err
		}
		var info *unix.TCPInfo
		var ierr error
		if err := rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
			return 0, err
		}
		if ierr != nil {
			return 0, ierr
		}
		n += uint64(info.Total_retrans)
	}
	return n, nil
}

// tcpExt reads the named TcpExt counters of a host's namespace
// (/proc/net/netstat as seen from a thread inside it).
func tcpExt(h *testnet.Host, names ...string) (map[string]uint64, error) {
	var text []byte
	if err := h.Do(func() error {
		var err error
		text, err = os.ReadFile("/proc/thread-self/net/netstat")
		return err
	}); err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	var header []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "TcpExt:" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i := 1; i < len(f) && i < len(header); i++ {
			for _, n := range names {
				if header[i] == n {
					v, err := strconv.ParseUint(f[i], 10, 64)
					if err != nil {
						return nil, err
					}
					out[n] = v
				}
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, errors.New("no TcpExt " + n + " in /proc/net/netstat")
		}
	}
	return out, nil
}
