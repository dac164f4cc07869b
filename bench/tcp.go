package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
	"golang.org/x/sys/unix"
)

// tcpSetupTimeout bounds connection set-up and tear-down.
const tcpSetupTimeout = 5 * time.Second

// TCP measures Linux TCP from a to b over the caller's topology: opts.Streams
// connections opened on a thread inside each host's namespace, a Go sender
// on A writing as fast as the connection takes, a Go receiver on B reading
// and discarding. On a Star the traffic crosses the switch namespace, with
// whatever loss and rate limits are set on it. It reports application
// bytes received per second (Gb/s) in the window after a warm-up, the
// senders' retransmissions, and the offload state of the path's veths, which
// decides what the switch's drops mean (see the package documentation).
func TCP(ctx context.Context, a, b *testnet.Host, opts TCPOptions) (res TCPResult, err error) {
	res = TCPResult{Backend: "tcp", Streams: opts.Streams, IPv6: opts.IPv6}
	opts, err = opts.withDefaults()
	if err != nil {
		return res, err
	}
	res.Streams = opts.Streams
	if a == nil || b == nil || a.Port == nil || b.Port == nil {
		return res, errors.New("bench: two hosts with ports are needed")
	}
	eps := pathEndpoints(a, b)
	if opts.NoOffloads {
		for _, e := range eps {
			if err := e.SetOffloads(false); err != nil {
				return res, fmt.Errorf("bench tcp: offloads off on %s: %w", e, err)
			}
		}
	}
	var note string
	res.Offloads, note = offloadState(eps)
	if note != "" {
		res.Notes = append(res.Notes, note)
	}

	dst := b.IPv4
	if opts.IPv6 {
		dst = b.IPv6
	}
	addr := netip.AddrPortFrom(dst, opts.Port)
	var ln *net.TCPListener
	if err := b.Do(func() error {
		var err error
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		return res, fmt.Errorf("bench tcp: listen on %s in %s: %w", addr, b.Name, err)
	}
	defer ln.Close()

	var conns []net.Conn // every connection of both sides, closed on return
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	senders := make([]*net.TCPConn, 0, opts.Streams)
	setupCtx, cancel := context.WithTimeout(ctx, tcpSetupTimeout)
	defer cancel()
	if err := a.Do(func() error {
		var d net.Dialer
		for range opts.Streams {
			c, err := d.DialContext(setupCtx, "tcp", addr.String())
			if err != nil {
				return err
			}
			conns = append(conns, c)
			senders = append(senders, c.(*net.TCPConn))
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("bench tcp: connect from %s to %s: %w", a.Name, addr, err)
	}
	receivers := make([]net.Conn, 0, opts.Streams)
	if err := ln.SetDeadline(time.Now().Add(tcpSetupTimeout)); err != nil {
		return res, err
	}
	for range opts.Streams {
		c, err := ln.Accept()
		if err != nil {
			return res, fmt.Errorf("bench tcp: accept on %s: %w", addr, err)
		}
		conns = append(conns, c)
		receivers = append(receivers, c)
	}
	if opts.Connected != nil {
		if err := opts.Connected(); err != nil {
			return res, fmt.Errorf("bench tcp: after connecting: %w", err)
		}
	}

	var sent, received atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 2*opts.Streams)
	for _, c := range receivers {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for {
				n, err := c.Read(buf)
				received.Add(uint64(n))
				if err != nil {
					if !stop.Load() {
						errs <- fmt.Errorf("receive: %w", err)
					}
					return
				}
			}
		})
	}
	for _, c := range senders {
		wg.Go(func() {
			buf := make([]byte, opts.WriteSize)
			for !stop.Load() {
				n, err := c.Write(buf)
				sent.Add(uint64(n))
				if err != nil {
					if !stop.Load() {
						errs <- fmt.Errorf("send: %w", err)
					}
					return
				}
			}
		})
	}
	// end stops the streams: closing the connections unblocks every Read
	// and Write, so the wait is bounded.
	end := func() {
		stop.Store(true)
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}

	warm := min(opts.Duration/10, 200*time.Millisecond)
	var failed error
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			failed = ctx.Err()
		case err := <-errs:
			failed = err
		}
		return false
	}
	if !wait(warm) {
		end()
		return res, fmt.Errorf("bench tcp: %w", failed)
	}
	g0, t0 := received.Load(), time.Now()
	if !wait(opts.Duration - warm) {
		end()
		return res, fmt.Errorf("bench tcp: %w", failed)
	}
	g1, t1 := received.Load(), time.Now()
	for _, c := range senders {
		if r, err := retransmits(c); err == nil {
			res.Retransmits += r
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("retransmissions unknown: %v", err))
		}
	}
	end()

	res.Seconds = t1.Sub(t0).Seconds()
	res.Gbps = float64(g1-g0) * 8 / res.Seconds / 1e9
	res.Sent, res.Received = sent.Load(), received.Load()
	if g1 == g0 {
		// Nothing at all, not even a retransmission: the path does not
		// carry TCP, a set-up fault. Otherwise TCP was at work and the
		// window saw it wait (a timeout backed off past the window).
		if res.Received == 0 && res.Retransmits == 0 {
			return res, fmt.Errorf("bench tcp: nothing received from %s at %s", a.Name, addr)
		}
		res.Stalled = true
		res.Notes = append(res.Notes, fmt.Sprintf("stalled: nothing delivered in the %.0f ms window (%d bytes before it, %d retransmissions)",
			res.Seconds*1e3, g0, res.Retransmits))
	}
	return res, nil
}

// retransmits reads tcpi_total_retrans of a connection.
func retransmits(c *net.TCPConn) (uint64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var info *unix.TCPInfo
	var serr error
	if err := rc.Control(func(fd uintptr) {
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return uint64(info.Total_retrans), nil
}

// offloadState reads TSO, GSO and GRO on every end of the path with
// ethtool -k and sums them up: "on" or "off" when all three are so
// everywhere, otherwise each feature's state ("tso:on gso:on gro:off", which
// is what a new veth has; "mixed" for a feature that differs between ends),
// or "unknown" with a note saying why.
func offloadState(eps []*testnet.Endpoint) (state, note string) {
	if _, err := exec.LookPath("ethtool"); err != nil {
		return "unknown", "offload state unknown: ethtool is not installed"
	}
	features := [3]struct{ key, name string }{
		{"tcp-segmentation-offload", "tso"},
		{"generic-segmentation-offload", "gso"},
		{"generic-receive-offload", "gro"},
	}
	var on, seen [3]int
	for _, e := range eps {
		out, err := e.NS.Run("ethtool", "-k", e.Name)
		if err != nil {
			return "unknown", fmt.Sprintf("offload state unknown: %v", err)
		}
		for _, line := range strings.Split(out, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				continue
			}
			for i, f := range features {
				if k == f.key {
					seen[i]++
					if strings.HasPrefix(strings.TrimSpace(v), "on") {
						on[i]++
					}
				}
			}
		}
	}
	parts := make([]string, 0, 3)
	allOn, allOff := true, true
	for i, f := range features {
		if seen[i] != len(eps) {
			return "unknown", fmt.Sprintf("offload state unknown: %s missing from ethtool -k", f.key)
		}
		v := "mixed"
		switch on[i] {
		case 0:
			v = "off"
		case seen[i]:
			v = "on"
		}
		allOn = allOn && v == "on"
		allOff = allOff && v == "off"
		parts = append(parts, f.name+":"+v)
	}
	switch {
	case allOn:
		return "on", ""
	case allOff:
		return "off", ""
	}
	return strings.Join(parts, " "), ""
}
