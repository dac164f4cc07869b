package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/bench"
	"github.com/metaroce/metaroce/internal/testnet"
)

// demoBaselines is what the demo measured besides metaroce itself.
type demoBaselines struct {
	RawAFXDP     *bench.RawResult     `json:"raw_afxdp,omitempty"`
	RawAsavie    *bench.RawResult     `json:"raw_asavie,omitempty"`
	TCP          *bench.TCPResult     `json:"tcp,omitempty"`
	TCPNoOffload *bench.TCPResult     `json:"tcp_offloads_off,omitempty"`
	TCPPing      *bench.TCPPingResult `json:"tcp_ping_pong,omitempty"`
}

// baselines measures, on the same hosts and links, with the daemons
// stopped: the raw AF_XDP ceiling (and the same with asavie/xdp for the
// socket-layer comparison) over the lossless path, and Linux TCP through
// the lossy switch, with veth offloads at their defaults and then off.
func baselines(res *DemoResult, star *testnet.Star, o demoOpts) {
	a, b := star.Hosts[0], star.Hosts[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var bl demoBaselines
	// The ceiling is the link, not the loss: measure it with the switch
	// dropping nothing, then put the loss back for TCP.
	if err := star.Switch.SetLoss(0); err != nil {
		// A ceiling measured through the loss would flatter the ratio.
		res.Errors = append(res.Errors, fmt.Sprintf("switch: clearing the loss for the raw baselines: %v", err))
		return
	}
	ro := bench.RawOptions{Duration: o.duration, IPv6: o.ipv6, MTU: o.mtu}
	if r, err := bench.RawAFXDP(ctx, a, b, ro); err == nil {
		bl.RawAFXDP = &r
		res.RawAFXDPGbps, res.RawAFXDPRTTP50us = r.Gbps, r.LatP50
		res.RawSenderCPUNsPerFrame, res.RawSenderKernelShare = r.SenderCPUNsPerFrame, r.SenderKernelShare
	} else {
		res.Errors = append(res.Errors, fmt.Sprintf("raw AF_XDP baseline: %v", err))
	}
	// asavie/xdp has no multi-buffer frames: it compares at 1500 only,
	// and its absence above that is no failure of the demo.
	if o.mtu <= 1500 {
		if r, err := bench.RawAsavie(ctx, a, b, ro); err == nil {
			bl.RawAsavie = &r
		} else {
			res.Errors = append(res.Errors, fmt.Sprintf("asavie/xdp baseline: %v", err))
		}
	}
	if err := star.Switch.SetLoss(o.loss); err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("switch: restoring %g loss for TCP: %v", o.loss, err))
		return
	}
	to := bench.TCPOptions{Duration: o.duration, IPv6: o.ipv6}
	if r, err := bench.TCP(ctx, a, b, to); err == nil {
		bl.TCP = &r
		res.TCPOffloadsOnGbps = r.Gbps
	} else {
		res.Errors = append(res.Errors, fmt.Sprintf("TCP baseline: %v", err))
	}
	if r, err := bench.TCPPingPong(ctx, a, b, bench.TCPPingOptions{Count: o.latCount, IPv6: o.ipv6}); err == nil {
		bl.TCPPing = &r
		res.TCPRTTP50us, res.TCPRTTP99us = r.RTTP50us, r.RTTP99us
	} else {
		res.Errors = append(res.Errors, fmt.Sprintf("TCP ping-pong baseline: %v", err))
	}
	to.NoOffloads = true
	if r, err := bench.TCP(ctx, a, b, to); err == nil {
		bl.TCPNoOffload = &r
		res.TCPGbps = r.Gbps
	} else {
		res.Errors = append(res.Errors, fmt.Sprintf("TCP baseline, offloads off: %v", err))
	}
	res.Baselines = bl
}
