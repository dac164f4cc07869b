package demo

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// StreamResult is a Linux stream transport under the plane demo's
// schedule: MPTCP with one subflow per plane, or plain TCP on the plane
// that is cut, measured with metaroce's windows.
type StreamResult struct {
	Kind string `json:"kind"` // "mptcp" or "tcp"
	What string `json:"what"`
	// MPTCP: whether the kernel really ran the connection as MPTCP
	// (net.TCPConn.MultipathTCP); false means it fell back to TCP.
	Multipath    bool           `json:"multipath,omitempty"`
	Goodput      PlaneGoodput   `json:"goodput"`
	PlanePackets []PlanePackets `json:"plane_packets"`
	Windows      PlaneWindows   `json:"windows"`
	Series       []Point        `json:"series,omitempty"`
}

// mptcpSetup lets the in-kernel path manager open a subflow on every
// plane: both hosts accept as many subflows and announced addresses as
// there are planes, and the receiver announces its address on every plane
// but 0 (the one the client connects to). The client's kernel opens a
// subflow to each announced address, from the address its route to it
// picks: its own port on that plane.
func mptcpSetup(f *testnet.Planes) error {
	n := len(f.Switches)
	for _, h := range f.Hosts[:2] {
		if err := h.IP("mptcp endpoint flush", fmt.Sprintf("mptcp limits set subflow %d add_addr_accepted %d", n, n)); err != nil {
			return fmt.Errorf("mptcp limits in %s: %w", h.Name, err)
		}
	}
	b := f.Hosts[1]
	for p := 1; p < n; p++ {
		if err := b.IP(fmt.Sprintf("mptcp endpoint add %s dev %s signal", b.IPv4[p], b.Ports[p].Name)); err != nil {
			return fmt.Errorf("mptcp endpoint in %s: %w", b.Name, err)
		}
	}
	return nil
}

// runPlaneStream runs one stream connection from host 0 to host 1 for
// the whole schedule, sending as fast as it goes, and samples the bytes
// received.
func runPlaneStream(f *testnet.Planes, o planesOpts, mptcp bool) (*StreamResult, error) {
	a, b := f.Hosts[0], f.Hosts[1]
	res := &StreamResult{Kind: "tcp", What: fmt.Sprintf("one TCP connection on plane %d, the cut plane", o.cutPlane)}
	dst := b.IPv4[o.cutPlane]
	if mptcp {
		res.Kind, res.What = "mptcp", fmt.Sprintf("one MPTCP connection to plane 0's address, a subflow per plane (%d)", o.planes)
		dst = b.IPv4[0]
		if err := mptcpSetup(f); err != nil {
			return res, err
		}
	}
	addr := netip.AddrPortFrom(dst, 18700)
	// MPTCP listens on every address: a subflow's MP_JOIN SYN goes to the
	// address the receiver announced on its plane, and only a listener
	// bound there (or to all) takes it.
	laddr := addr.String()
	if mptcp {
		laddr = fmt.Sprintf(":%d", addr.Port())
	}
	var ln net.Listener
	if err := b.Do(func() error {
		var lc net.ListenConfig
		lc.SetMultipathTCP(mptcp)
		var err error
		ln, err = lc.Listen(context.Background(), "tcp", laddr)
		return err
	}); err != nil {
		return res, err
	}
	defer ln.Close()
	var snd, rcv net.Conn
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Do(func() error {
		var d net.Dialer
		d.SetMultipathTCP(mptcp)
		var err error
		snd, err = d.DialContext(ctx, "tcp", addr.String())
		return err
	}); err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	defer snd.Close()
	acc := make(chan error, 1)
	go func() {
		var err error
		rcv, err = ln.Accept()
		acc <- err
	}()
	if err := <-acc; err != nil {
		return res, fmt.Errorf("accept: %w", err)
	}
	defer rcv.Close()
	if tc, ok := snd.(*net.TCPConn); ok && mptcp {
		res.Multipath, _ = tc.MultipathTCP()
	}
	var got atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var failed errOnce
	wg.Go(func() {
		buf := make([]byte, 256<<10)
		for {
			n, err := rcv.Read(buf)
			got.Add(int64(n))
			if err != nil {
				if !stop.Load() {
					failed.set(fmt.Errorf("receive: %w", err))
				}
				return
			}
		}
	})
	wg.Go(func() {
		buf := make([]byte, 64<<10)
		for !stop.Load() {
			if _, err := snd.Write(buf); err != nil {
				if !stop.Load() {
					failed.set(fmt.Errorf("send: %w", err))
				}
				return
			}
		}
	})
	// Let the subflows come up and the window open before the clock starts.
	time.Sleep(200 * time.Millisecond)
	s, err := runSchedule(f, o, got.Load, nil)
	stop.Store(true)
	snd.Close()
	rcv.Close()
	wg.Wait()
	if err != nil {
		return res, err
	}
	if err := failed.get(); err != nil {
		return res, err
	}
	res.PlanePackets = planePackets(s)
	res.Goodput, res.Windows, res.Series = measurePlanes(s, s.samples[len(s.samples)-1].at, o)
	return res, nil
}
