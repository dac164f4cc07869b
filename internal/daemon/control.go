package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/xsk"
	"github.com/metaroce/metaroce/transport"
)

// The daemon's own operations on the control socket, beside the session
// operations of control.Server (docs/api.md): one JSON object per
// SOCK_SEQPACKET message each way (control/proto), every request with
// "v":1 and a "seq" its answer echoes:
//
//	{"op":"status"}               engines, links, transport counters
//	{"op":"watch",...}            a stream of telemetry snapshots (telemetry.go)
//	{"op":"expose"}               memory for the compliance suite (expose.go)
//
// Traffic comes from applications (client/, `metaroce perf`): the daemon
// has no traffic source of its own.

// Request is a control request.
type Request struct {
	V   int    `json:"v"`
	Seq uint64 `json:"seq"`
	Op  string `json:"op"`
	WatchParams
}

// Response is a control response.
type Response struct {
	V       int            `json:"v"`
	Seq     uint64         `json:"seq"`
	Code    proto.Code     `json:"code,omitempty"`
	Error   string         `json:"error,omitempty"`
	Engines []EngineStatus `json:"engines,omitempty"`
	Expose  *Exposed       `json:"expose,omitempty"` // expose.go
}

// EngineStatus describes one engine.
type EngineStatus struct {
	Iface     string             `json:"iface"`
	Local     string             `json:"local"`
	Link      dataplane.LinkInfo `json:"link"`
	Conns     int                `json:"connections"`
	Transport transport.Stats    `json:"transport"`
	XDP       *bpf.Counters      `json:"xdp,omitempty"`
	XSK       *xsk.Stats         `json:"xsk,omitempty"` // the AF_XDP socket's kernel counters
	RxPackets uint64             `json:"rx_packets"`
	TxPackets uint64             `json:"tx_packets"`
	Sleeps    uint64             `json:"sleeps"`
	// Iterations, Yields and YieldStalls say how the engine spent its
	// idle time (dataplane.EngineStats): a round trip whose engines
	// slept or stalled in yields paid a thread wake-up for it.
	Iterations  uint64 `json:"iterations"`
	Yields      uint64 `json:"yields"`
	YieldStalls uint64 `json:"yield_stalls"`
	// BusyNanos and IdleNanos split the engine's time between iterations
	// that found work and those that did not (sleeping included).
	BusyNanos uint64 `json:"busy_ns"`
	// CPU is the engine thread's CPU time so far (internal/threadcpu):
	// what its polling, its transport work and the kernel's work inside
	// its system calls cost. Absent for an engine not running.
	CPU       *dataplane.EngineCPU `json:"cpu,omitempty"`
	IdleNanos uint64               `json:"idle_ns"`
	// Planes: the engine's part of each plane, for an engine over
	// several (plane_interfaces).
	Planes []PlaneStatus `json:"planes,omitempty"`
	// PlaneCopied and PlaneCopyDrops are the packets the engine's
	// PlaneLink copied to another plane's link than their buffer's, and
	// those it dropped for want of room there (dataplane.PlaneLink).
	PlaneCopied    uint64 `json:"plane_copied,omitempty"`
	PlaneCopyDrops uint64 `json:"plane_copy_drops,omitempty"`
}

// PlaneStatus is an engine's link on one plane.
type PlaneStatus struct {
	Plane int                `json:"plane"`
	Iface string             `json:"iface"`
	Local string             `json:"local"`
	Link  dataplane.LinkInfo `json:"link"`
	XSK   *xsk.Stats         `json:"xsk,omitempty"`
}

// serveControl opens the control socket and serves sessions on it: the
// application interface (control.Server) and, for operations it does not
// know, the daemon's own (fallback).
func (d *Daemon) serveControl(ctx context.Context) (*control.Server, func(), error) {
	path := d.cfg.ControlSocket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	gid, err := lookupGroup(d.cfg.SocketGroup)
	if err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	ln, err := control.Listen(path, d.cfg.SocketMode, gid)
	if err != nil {
		return nil, nil, err
	}
	var engines []*control.Engine
	for _, en := range d.engines {
		cfg := en.ep.Config()
		engines = append(engines, &control.Engine{E: en.e, D: en.ctl, Local: en.local, Iface: en.iface,
			Mask: cfg.IDMask, Tag: cfg.IDTag})
	}
	srv := control.NewServer(d.cfg.Limits, engines, d.fallback, d.log)
	d.ctl = srv
	done := make(chan struct{})
	go func() {
		srv.Serve(ctx, ln)
		close(done)
	}()
	return srv, func() { ln.Close(); <-done }, nil
}

// lookupGroup resolves socket_group (a name or a numeric id); -1 for none.
func lookupGroup(g string) (int, error) {
	if g == "" {
		return -1, nil
	}
	if id, err := strconv.Atoi(g); err == nil {
		return id, nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return -1, err
	}
	return strconv.Atoi(grp.Gid)
}

// credKey carries the caller's credentials to the daemon's own ops.
type credKey struct{}

// privileged reports whether the caller is root or runs as the daemon.
func privileged(c proto.Cred) bool { return c.UID == 0 || int(c.UID) == os.Getuid() }

// fallback answers the daemon's own operations.
func (d *Daemon) fallback(ctx context.Context, cred proto.Cred, h proto.Header, raw []byte, conn *proto.Conn) (any, error) {
	ctx = withStream(ctx, conn)
	ctx = context.WithValue(ctx, credKey{}, cred)
	var req Request
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, proto.Errorf(proto.CodeBadRequest, "%v", err)
	}
	resp := Response{V: proto.Version, Seq: h.Seq, Code: proto.CodeOK}
	if req.Op == "expose" && !privileged(cred) {
		// The compliance memory opens the daemon's own memory to remote
		// peers: for the operator, not for every application the
		// socket's mode lets in.
		return nil, proto.Errorf(proto.CodeDenied, "%s: only root or the daemon's user (uid %d) may use it", req.Op, os.Getuid())
	}
	if err := d.handle(ctx, &req, &resp); err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		resp.Code, resp.Error = proto.CodeInternal, err.Error()
	}
	return &resp, nil
}

func (d *Daemon) handle(ctx context.Context, req *Request, resp *Response) error {
	switch req.Op {
	case "expose":
		return d.expose(ctx, resp)
	case "status":
		for _, en := range d.engines {
			st := EngineStatus{Iface: en.iface, Local: en.local.String(), Link: en.link.Info(),
				RxPackets: en.e.Stats.RxPackets.Load(), TxPackets: en.e.Stats.TxPackets.Load(),
				Sleeps: en.e.Stats.Sleeps.Load(), Iterations: en.e.Stats.Iterations.Load(),
				Yields: en.e.Stats.Yields.Load(), YieldStalls: en.e.Stats.YieldStalls.Load(),
				BusyNanos: en.e.Stats.BusyNanos.Load(), IdleNanos: en.e.Stats.IdleNanos.Load(),
				CPU: en.e.CPU()}
			if err := en.e.Do(ctx, func(transport.Time) {
				st.Transport = *en.ep.Stats()
				st.Conns = en.ep.Conns()
				if pl, ok := en.link.(*dataplane.PlaneLink); ok {
					st.PlaneCopied, st.PlaneCopyDrops = pl.Copied, pl.CopyDrops
				}
			}); err != nil {
				return err
			}
			if en.xdp != nil {
				if c, err := en.xdp.Program.Counters(); err == nil {
					st.XDP = &c
				}
			}
			if en.afx != nil {
				if x, err := en.afx.Socket().Stats(); err == nil {
					st.XSK = &x
				}
			}
			if len(en.planes) > 1 {
				for _, p := range en.planes {
					ps := PlaneStatus{Plane: p.plane, Iface: p.iface, Local: p.local.String(), Link: p.link.Info()}
					if p.afx != nil {
						if x, err := p.afx.Socket().Stats(); err == nil {
							ps.XSK = &x
						}
					}
					st.Planes = append(st.Planes, ps)
				}
			}
			resp.Engines = append(resp.Engines, st)
		}
		return nil
	case "watch":
		return d.watch(ctx, req.WatchParams)
	}
	return proto.Errorf(proto.CodeUnknownOp, "unknown operation %q", req.Op)
}

// Client talks to a daemon's control socket.
type Client struct {
	c    *proto.Conn
	seq  uint64
	path string
}

// Dial connects to the control socket at path, retrying until timeout
// (a daemon that was just started may not listen yet), and returns once
// the daemon has answered a hello: from then on the connection is one of
// its sessions. (Without the round trip, a connection accepted but not
// yet served is no session, and a caller counting sessions next, through
// another connection, would find one fewer.)
func Dial(path string, timeout time.Duration) (*Client, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := proto.Dial(path)
		if err == nil {
			cl := &Client{c: c, path: path}
			if _, err := cl.Do(Request{Op: proto.OpHello}); err != nil {
				c.Close()
				return nil, fmt.Errorf("control socket %s: hello: %w", path, err)
			}
			return cl, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("control socket %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do sends req and returns the response; a response error becomes err.
func (c *Client) Do(req Request) (*Response, error) {
	c.seq++
	req.V, req.Seq = proto.Version, c.seq
	if err := c.c.Send(req); err != nil {
		return nil, err
	}
	msg, files, err := c.c.Recv()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		f.Close()
	}
	var resp Response
	if err := json.Unmarshal(msg, &resp); err != nil {
		return nil, err
	}
	if resp.Seq != req.Seq {
		return nil, fmt.Errorf("control: reply to request %d, want %d", resp.Seq, req.Seq)
	}
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }
