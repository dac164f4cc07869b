package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// TCPPingOptions configure TCPPingPong.
type TCPPingOptions struct {
	Count int  // round trips (default 2000)
	Size  int  // bytes each way (default 64)
	IPv6  bool // over b's IPv6 address
	Port  uint16
}

// TCPPingResult is a TCP ping-pong's round trips, in microseconds: one
// message from a to b and its echo back, timed on a.
type TCPPingResult struct {
	Size       int     `json:"size"`
	RoundTrips int     `json:"round_trips"`
	RTTMinUs   float64 `json:"rtt_min_us"`
	RTTP50us   float64 `json:"rtt_p50_us"`
	RTTP99us   float64 `json:"rtt_p99_us"`
}

// TCPPingPong is the latency baseline an application gets from Linux
// TCP: a connection with TCP_NODELAY from a to an echo server on b, Go's
// ordinary blocking reads and writes (the runtime's netpoller, as any Go
// or epoll-based server), one message in flight, Count round trips after
// a warm-up of a tenth as many. Through a Star it crosses the switch
// namespace with whatever loss is set there.
func TCPPingPong(ctx context.Context, a, b *testnet.Host, o TCPPingOptions) (TCPPingResult, error) {
	if o.Count <= 0 {
		o.Count = 2000
	}
	if o.Size <= 0 {
		o.Size = 64
	}
	if o.Port == 0 {
		o.Port = 5202
	}
	res := TCPPingResult{Size: o.Size}
	if a == nil || b == nil {
		return res, errors.New("bench tcp ping-pong: two hosts are needed")
	}
	dst := b.IPv4
	if o.IPv6 {
		dst = b.IPv6
	}
	addr := netip.AddrPortFrom(dst, o.Port)
	var ln *net.TCPListener
	if err := b.Do(func() error {
		var err error
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		return res, fmt.Errorf("bench tcp ping-pong: listen on %s in %s: %w", addr, b.Name, err)
	}
	defer ln.Close()
	echoed := make(chan error, 1)
	go func() {
		ln.SetDeadline(time.Now().Add(tcpSetupTimeout))
		c, err := ln.Accept()
		if err != nil {
			echoed <- err
			return
		}
		defer c.Close()
		c.(*net.TCPConn).SetNoDelay(true)
		_, err = io.Copy(c, c) // until the client closes
		echoed <- err
	}()
	var c net.Conn
	if err := a.Do(func() error {
		var d net.Dialer
		var err error
		dctx, cancel := context.WithTimeout(ctx, tcpSetupTimeout)
		defer cancel()
		c, err = d.DialContext(dctx, "tcp", addr.String())
		return err
	}); err != nil {
		return res, fmt.Errorf("bench tcp ping-pong: connect from %s to %s: %w", a.Name, addr, err)
	}
	c.(*net.TCPConn).SetNoDelay(true)
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	buf := make([]byte, o.Size)
	warm := o.Count / 10
	rtts := make([]time.Duration, 0, o.Count)
	for i := range warm + o.Count {
		buf[0] = byte(i)
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return res, fmt.Errorf("bench tcp ping-pong: write: %w", err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			c.Close()
			return res, fmt.Errorf("bench tcp ping-pong: read: %w", err)
		}
		if buf[0] != byte(i) {
			c.Close()
			return res, fmt.Errorf("bench tcp ping-pong: round trip %d echoed %d", i, buf[0])
		}
		if i >= warm {
			rtts = append(rtts, time.Since(t0))
		}
	}
	c.Close()
	if err := <-echoed; err != nil {
		return res, fmt.Errorf("bench tcp ping-pong: echo server: %w", err)
	}
	slices.Sort(rtts)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	res.RoundTrips = len(rtts)
	res.RTTMinUs, res.RTTP50us, res.RTTP99us = us(rtts[0]), us(percentile(rtts, 0.5)), us(percentile(rtts, 0.99))
	return res, nil
}
