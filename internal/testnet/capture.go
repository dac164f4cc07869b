package testnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoTcpdump is returned by StartCapture when tcpdump is not installed.
var ErrNoTcpdump = errors.New("testnet: tcpdump not found: install the Debian package tcpdump (make deps)")

// Capture is a running packet capture of one interface, written to a pcap
// file by tcpdump inside the interface's namespace.
//
// Why tcpdump and not an AF_PACKET socket here: the file has to be what an
// operator's own capture would be (docs/operate.md), tcpdump's ring and
// BPF filter come for free, and the capture runs in the namespace as any
// other command does (Namespace.Command), so Net.Close reaps it if a test
// forgets to.
//
// Where to capture: on a switch port (Star.Switch.Ports[i]) a capture sees
// both directions of host i's traffic whatever the host's dataplane, the
// host's packets before the switch's drops and the packets to the host
// after them. On a host's own interface, AF_XDP traffic is invisible:
// the XDP program redirects received MetaRoCE packets to the socket before
// any tap, and AF_XDP transmit bypasses the taps too.
type Capture struct {
	// Path is the pcap file.
	Path string
	// Iface is the captured interface, "namespace-label:name".
	Iface string

	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
	err    error
	once   sync.Once
}

// StartCapture starts capturing iface (an interface inside ns) to path, with
// an optional tcpdump filter expression ("udp port 4792"). It returns once
// tcpdump is listening, so packets sent after it are in the file.
func (ns *Namespace) StartCapture(iface, path string, filter ...string) (*Capture, error) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		return nil, ErrNoTcpdump
	}
	ctx, cancel := context.WithCancel(context.Background())
	// -U: write each packet as it comes, so a crash loses nothing; -s 0:
	// whole packets (the CRC is in the last 4 bytes); -Z root: keep
	// writing to a root-owned directory (tcpdump drops to its own user
	// otherwise); --immediate-mode: no batching in the kernel ring;
	// -B: a 64 MiB ring, so a burst at veth speed is not dropped.
	args := append([]string{"-i", iface, "-n", "-s", "0", "-B", "65536", "-U", "--immediate-mode", "-Z", "root", "-w", path}, filter...)
	c := &Capture{Path: path, Iface: ns.Label + ":" + iface, cmd: ns.Command(ctx, "tcpdump", args...), cancel: cancel, done: make(chan struct{})}
	c.cmd.Cancel = func() error { return c.cmd.Process.Signal(syscall.SIGINT) }
	c.cmd.WaitDelay = 5 * time.Second
	pipe, err := c.cmd.StderrPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("testnet: start tcpdump on %s: %w", c.Iface, err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(pipe)
		signalled := false
		for sc.Scan() {
			c.mu.Lock()
			c.stderr.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "listening on") {
				close(ready)
				signalled = true
			}
		}
		io.Copy(io.Discard, pipe)
		err := c.cmd.Wait()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		if !signalled {
			close(ready)
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
	}
	select {
	case <-c.done:
		cancel()
		return nil, fmt.Errorf("testnet: tcpdump on %s exited: %s", c.Iface, strings.TrimSpace(c.stderrText()))
	default:
	}
	if !strings.Contains(c.stderrText(), "listening on") {
		c.Stop()
		return nil, fmt.Errorf("testnet: tcpdump on %s not listening after 10s: %s", c.Iface, strings.TrimSpace(c.stderrText()))
	}
	return c, nil
}

// Capture starts capturing this interface to path (StartCapture).
func (e *Endpoint) Capture(path string, filter ...string) (*Capture, error) {
	return e.NS.StartCapture(e.Name, path, filter...)
}

func (c *Capture) stderrText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// Stop ends the capture (SIGINT, so tcpdump flushes the file) and waits for
// tcpdump to exit. It reports tcpdump's own failure, and packets the kernel
// dropped before tcpdump read them, which would make the file incomplete.
// Calling it again returns the same result.
func (c *Capture) Stop() error {
	c.once.Do(func() {
		// Let packets already on the wire reach the socket.
		time.Sleep(100 * time.Millisecond)
		c.cancel()
		<-c.done
		c.mu.Lock()
		defer c.mu.Unlock()
		out := c.stderr.String()
		// tcpdump exits 0 on SIGINT, which Wait reports as the
		// context's cancellation.
		if c.err != nil && !errors.Is(c.err, context.Canceled) {
			c.err = fmt.Errorf("testnet: tcpdump on %s: %v: %s", c.Iface, c.err, strings.TrimSpace(out))
			return
		}
		c.err = nil
		for _, line := range strings.Split(out, "\n") {
			var n int
			if _, err := fmt.Sscanf(line, "%d packets dropped by kernel", &n); err == nil && n > 0 {
				c.err = fmt.Errorf("testnet: capture on %s incomplete: %d packets dropped by kernel", c.Iface, n)
			}
		}
	})
	return c.err
}

// CaptureSet is captures of several interfaces, stopped together.
type CaptureSet []*Capture

// CaptureAll starts one capture per endpoint, each to
// dir/<prefix><namespace>-<peer namespace>.pcap, so the switch port facing
// host 0 of a star is sw-h0.pcap (for example the demo's -pcap DIR:
// CaptureAll(dir, "", star.Switch.Ports...)).
func CaptureAll(dir, prefix string, eps ...*Endpoint) (CaptureSet, error) {
	var cs CaptureSet
	for _, e := range eps {
		peer := e.Name
		if e.Peer != nil {
			peer = e.Peer.NS.Label
		}
		c, err := e.Capture(filepath.Join(dir, prefix+e.NS.Label+"-"+peer+".pcap"))
		if err != nil {
			cs.Stop()
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// Stop stops every capture and returns the first error.
func (cs CaptureSet) Stop() error {
	var first error
	for _, c := range cs {
		if err := c.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Paths lists the capture files.
func (cs CaptureSet) Paths() []string {
	var p []string
	for _, c := range cs {
		p = append(p, c.Path)
	}
	return p
}
