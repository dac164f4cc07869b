package compliance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// Memory is what a target exposes for the memory cases (docs/compliance.md):
// a service id to connect to, registered regions, and the receive buffers
// it posts on each connection. Events, when set, returns the receive
// completions the target has reported so far (for immediate data, §4.3).
type Memory struct {
	Service uint32
	Regions []Region
	Recv    RecvBuffers
	Events  func() ([]Event, error)
}

// Region is a registered region as a peer addresses it (§10.1).
type Region struct {
	// Service, when set and not Memory.Service, says the region belongs
	// to another protection domain (§10.1): the memory cases do not use it,
	// the domain case checks that it cannot be reached.
	Service uint32   `json:"service,omitempty"`
	Name    string   `json:"name"`
	Addr    uint64   `json:"addr"`
	RKey    uint32   `json:"rkey"`
	Len     int      `json:"len"`
	Access  []string `json:"access"` // "remote_read", "remote_write" (§10.2)
}

func (r Region) has(right string) bool {
	for _, a := range r.Access {
		if a == right {
			return true
		}
	}
	return false
}

// RecvBuffers: buffer n (RecvSeq n < Count) is Size bytes at Addr + n*Size
// inside the region named Region (so a READ can show what a SEND placed).
type RecvBuffers struct {
	Region string `json:"region"`
	Addr   uint64 `json:"addr"`
	Count  int    `json:"count"`
	Size   int    `json:"size"`
}

// Event is one receive completion at the target.
type Event struct {
	PeerConn uint32 `json:"peer_conn"` // the suite's connection id
	Op       string `json:"op"`        // "recv" (SEND) or "recv_write_imm"
	Status   string `json:"status"`    // "ok" or an error name
	Bytes    int    `json:"bytes"`
	Imm      uint32 `json:"imm"`
	HasImm   bool   `json:"has_imm"`
}

// region returns the first region granting exactly the rights asked for.
func (m *Memory) region(read, write bool) (Region, bool) {
	if m == nil {
		return Region{}, false
	}
	for _, r := range m.Regions {
		if r.Service != 0 && r.Service != m.Service {
			continue
		}
		if r.has("remote_read") == read && r.has("remote_write") == write {
			return r, true
		}
	}
	return Region{}, false
}

// foreign returns a region of another protection domain, if exposed.
func (m *Memory) foreign() (Region, bool) {
	if m == nil {
		return Region{}, false
	}
	for _, r := range m.Regions {
		if r.Service != 0 && r.Service != m.Service {
			return r, true
		}
	}
	return Region{}, false
}

// exposeAnswer is the control socket's answer to {"op":"expose"}.
type exposeAnswer struct {
	Error  string `json:"error"`
	Expose *struct {
		Service uint32      `json:"service"`
		Regions []Region    `json:"regions"`
		Recv    RecvBuffers `json:"recv"`
		Events  []Event     `json:"events"`
	} `json:"expose"`
}

// ExposeControl asks a target's control socket (a unix SOCK_SEQPACKET
// socket that takes one JSON request per message, as metaroced's does:
// docs/api.md) to expose memory, and returns it; Events asks again each
// time.
func ExposeControl(path string, timeout time.Duration) (*Memory, error) {
	a, err := exposeOnce(path, timeout)
	if err != nil {
		return nil, err
	}
	m := &Memory{Service: a.Expose.Service, Regions: a.Expose.Regions, Recv: a.Expose.Recv}
	m.Events = func() ([]Event, error) {
		a, err := exposeOnce(path, timeout)
		if err != nil {
			return nil, err
		}
		return a.Expose.Events, nil
	}
	return m, nil
}

func exposeOnce(path string, timeout time.Duration) (*exposeAnswer, error) {
	deadline := time.Now().Add(timeout)
	var c net.Conn
	var err error
	for {
		// A target that was just started may not listen yet.
		if c, err = net.Dial("unixpacket", path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("control socket %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(`{"v":1,"seq":1,"op":"expose"}`)); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20) // one message: the answer whole
	n, err := c.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if n == 0 {
		return nil, errors.New("control socket closed")
	}
	var a exposeAnswer
	if err := json.Unmarshal(buf[:n], &a); err != nil {
		return nil, err
	}
	if a.Error != "" {
		return nil, errors.New(a.Error)
	}
	if a.Expose == nil {
		return nil, errors.New("control socket: no expose answer (target does not support the expose op)")
	}
	return &a, nil
}
