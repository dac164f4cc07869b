package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/transport"
)

// The control socket, until the shared-memory client API replaces the
// generator: a unix stream socket carrying one JSON request per line and
// one JSON response per line. Requests:
//
//	{"op":"status"}
//	{"op":"arm", "gen":{...}}     make this daemon a generator target
//	{"op":"write","gen":{...}}    run a writer to gen.peer and wait for it
//	{"op":"target"}               the target's verification counts
//	{"op":"expose"}               memory for the compliance suite (expose.go)

// Request is a control request.
type Request struct {
	Op  string    `json:"op"`
	Gen GenParams `json:"gen,omitempty"`
}

// GenParams are a generator run's parameters.
type GenParams struct {
	Peer     string `json:"peer,omitempty"`
	Messages int    `json:"messages,omitempty"`
	Size     int    `json:"size,omitempty"`
	Slots    int    `json:"slots,omitempty"`
	Streams  int    `json:"streams,omitempty"`
	Seed     uint64 `json:"seed,omitempty"`
	Latency  bool   `json:"latency,omitempty"`
	Engine   int    `json:"engine,omitempty"`
}

func (p GenParams) config() (dataplane.GenConfig, error) {
	c := dataplane.GenConfig{Size: p.Size, Slots: p.Slots, Seed: p.Seed, Messages: p.Messages,
		Streams: p.Streams, Latency: p.Latency}
	if p.Peer != "" {
		a, err := netip.ParseAddr(p.Peer)
		if err != nil {
			return c, fmt.Errorf("peer: %w", err)
		}
		c.Peer = a
	}
	if c.Size <= 0 {
		return c, errors.New("gen.size must be positive")
	}
	return c, nil
}

// Response is a control response.
type Response struct {
	Error   string                 `json:"error,omitempty"`
	Engines []EngineStatus         `json:"engines,omitempty"`
	Result  *dataplane.GenResult   `json:"result,omitempty"`
	Target  *dataplane.TargetStats `json:"target,omitempty"`
	Expose  *Exposed               `json:"expose,omitempty"` // expose.go
}

// EngineStatus describes one engine.
type EngineStatus struct {
	Iface     string             `json:"iface"`
	Local     string             `json:"local"`
	Link      dataplane.LinkInfo `json:"link"`
	Conns     int                `json:"connections"`
	Transport transport.Stats    `json:"transport"`
	XDP       *bpf.Counters      `json:"xdp,omitempty"`
	RxPackets uint64             `json:"rx_packets"`
	TxPackets uint64             `json:"tx_packets"`
	Sleeps    uint64             `json:"sleeps"`
}

func (d *Daemon) serveControl(ctx context.Context) (net.Listener, error) {
	path := d.cfg.ControlSocket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	os.Remove(path) // a stale socket of an earlier run
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, d.cfg.SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go d.serveConn(ctx, c)
		}
	}()
	return ln, nil
}

func (d *Daemon) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req Request
		var resp Response
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = "bad request: " + err.Error()
		} else if err := d.handle(ctx, &req, &resp); err != nil {
			resp.Error = err.Error()
		}
		if enc.Encode(&resp) != nil {
			return
		}
	}
}

func (d *Daemon) handle(ctx context.Context, req *Request, resp *Response) error {
	switch req.Op {
	case "expose":
		return d.expose(ctx, resp)
	case "status":
		for _, en := range d.engines {
			st := EngineStatus{Iface: en.iface, Local: en.local.String(), Link: en.link.Info(),
				RxPackets: en.e.Stats.RxPackets.Load(), TxPackets: en.e.Stats.TxPackets.Load(),
				Sleeps: en.e.Stats.Sleeps.Load()}
			if err := en.e.Do(ctx, func(transport.Time) {
				st.Transport = *en.ep.Stats()
				st.Conns = en.ep.Conns()
			}); err != nil {
				return err
			}
			if en.xdp != nil {
				if c, err := en.xdp.Program.Counters(); err == nil {
					st.XDP = &c
				}
			}
			resp.Engines = append(resp.Engines, st)
		}
		return nil
	}
	if req.Gen.Engine < 0 || req.Gen.Engine >= len(d.engines) {
		return fmt.Errorf("gen.engine %d: have %d engines", req.Gen.Engine, len(d.engines))
	}
	en := d.engines[req.Gen.Engine]
	switch req.Op {
	case "arm":
		// Every engine: a writer's CONNECT may reach any queue, and its
		// connection then lives on the engine that got it.
		gc, err := req.Gen.config()
		if err != nil {
			return err
		}
		for _, en := range d.engines {
			if err := en.e.Do(ctx, func(transport.Time) { en.driver.ensureTarget(gc) }); err != nil {
				return err
			}
		}
		return nil
	case "target":
		var ts dataplane.TargetStats
		armed := false
		for _, en := range d.engines {
			if err := en.e.Do(ctx, func(transport.Time) {
				if t := en.driver.target; t != nil {
					s := t.Stats()
					ts.Verified += s.Verified
					ts.Corrupt += s.Corrupt
					ts.Duplicates += s.Duplicates
					ts.Bytes += s.Bytes
					armed = true
				}
			}); err != nil {
				return err
			}
		}
		if !armed {
			return errors.New("no target armed")
		}
		resp.Target = &ts
		return nil
	case "write":
		gc, err := req.Gen.config()
		if err != nil {
			return err
		}
		w, err := dataplane.NewWriter(gc)
		if err != nil {
			return err
		}
		var busy bool
		if err := en.e.Do(ctx, func(transport.Time) {
			if en.driver.writer != nil {
				busy = true
				return
			}
			en.driver.writer = w
		}); err != nil {
			return err
		}
		if busy {
			return errBusy
		}
		defer en.e.Do(context.Background(), func(transport.Time) { en.driver.writer = nil })
		select {
		case res := <-w.Done():
			resp.Result = &res
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("unknown op %q", req.Op)
}

// Client talks to a daemon's control socket.
type Client struct {
	c   net.Conn
	sc  *bufio.Scanner
	enc *json.Encoder
}

// Dial connects to the control socket at path, retrying until timeout
// (a daemon that was just started may not listen yet).
func Dial(path string, timeout time.Duration) (*Client, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			sc := bufio.NewScanner(c)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			return &Client{c: c, sc: sc, enc: json.NewEncoder(c)}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("control socket %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do sends req and returns the response; a response error becomes err.
func (c *Client) Do(req Request) (*Response, error) {
	if err := c.enc.Encode(&req); err != nil {
		return nil, err
	}
	if !c.sc.Scan() {
		if err := c.sc.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("control socket closed")
	}
	var resp Response
	if err := json.Unmarshal(c.sc.Bytes(), &resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }
