package testnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Namespace is one named network namespace of a Net.
type Namespace struct {
	// Name is the ip netns name: "ip netns exec <Name> ..." enters it.
	Name string
	// Label is the short label it was created with ("a", "switch").
	Label string

	net *Net

	mu sync.Mutex
	// sticky are ip commands (route and neigh "replace" lines) that a link
	// going down undoes and Link.Restore re-applies.
	sticky []string
}

func (ns *Namespace) String() string { return ns.Name }

// Do runs fn on an OS thread inside the namespace and returns its error. See
// the package doc for the thread rule: fn runs on its own goroutine, locked
// to a thread that is moved into the namespace and back; sockets fn opens stay
// in the namespace; goroutines fn starts do not; fn must not call t.Fatal.
func (ns *Namespace) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Not deferred: UnlockOSThread is called only once the thread is back
		// in its original namespace. Otherwise this goroutine exits locked and
		// the runtime kills the thread.
		restore, err := enter(ns.Name)
		if err != nil {
			if restore == nil {
				runtime.UnlockOSThread() // never left the original namespace
			}
			errc <- err
			return
		}
		var fnErr error
		func() {
			defer func() {
				if r := recover(); r != nil {
					fnErr = fmt.Errorf("testnet: panic in %s: %v", ns.Name, r)
				}
			}()
			fnErr = fn()
		}()
		if restore() == nil {
			runtime.UnlockOSThread()
		}
		errc <- fnErr
	}()
	return <-errc
}

// Go starts fn on a goroutine that stays inside the namespace for its whole
// life: its thread is locked, moved into the namespace and never moved back;
// the Go runtime terminates the thread when fn returns. Go returns once the
// thread is inside (or failed to get there).
func (ns *Namespace) Go(fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if _, err := enter(ns.Name); err != nil {
			errc <- err
			return // exits locked: the thread is discarded either way
		}
		errc <- nil
		fn()
	}()
	return <-errc
}

// enter moves the calling (locked) thread into the named namespace. It
// returns a function that moves the thread back. On error, restore is nil if
// the thread never left its namespace.
func enter(name string) (restore func() error, err error) {
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("testnet: open own netns: %w", err)
	}
	target, err := unix.Open(netnsDir+"/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(orig)
		return nil, fmt.Errorf("testnet: open netns %s: %w", name, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		unix.Close(orig)
		return nil, fmt.Errorf("testnet: setns %s: %w", name, err)
	}
	return func() error {
		defer unix.Close(orig)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("testnet: setns back from %s: %w", name, err)
		}
		return nil
	}, nil
}

// Command returns a command that runs inside the namespace through
// ip netns exec. The caller starts it and owns it; Net.Close kills it if it
// is still running then.
func (ns *Namespace) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its standard output;
// the error carries the standard error.
func (ns *Namespace) Run(name string, args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// IP runs ip commands in the namespace, one per argument, without the leading
// "ip" and without options ("link set lo up", "route add ::/0 via fd00::1"). Several run in one ip -batch
// process, which stops at the first failure and names its line.
func (ns *Namespace) IP(cmds ...string) error {
	switch len(cmds) {
	case 0:
		return nil
	case 1:
		_, err := run("ip", append([]string{"-n", ns.Name}, strings.Fields(cmds[0])...)...)
		return err
	}
	_, err := runInput([]byte(strings.Join(cmds, "\n")+"\n"), "ip", "-n", ns.Name, "-batch", "-")
	return err
}

// Sysctl sets kernel parameters in the namespace (one sysctl process).
func (ns *Namespace) Sysctl(kv map[string]string) error {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic command lines in error messages
	args := []string{"-q", "-w"}
	for _, k := range keys {
		args = append(args, k+"="+kv[k])
	}
	_, err := ns.Run("sysctl", args...)
	return err
}

// EnableForwarding turns on IPv4 and IPv6 forwarding, and hashes multipath
// routes on the L4 ports (policy 1) so that the UDP source port selects the
// path, as a fabric's ECMP does.
func (ns *Namespace) EnableForwarding() error {
	return ns.Sysctl(map[string]string{
		"net.ipv4.ip_forward":                "1",
		"net.ipv6.conf.all.forwarding":       "1",
		"net.ipv6.conf.default.forwarding":   "1",
		"net.ipv4.fib_multipath_hash_policy": "1",
		"net.ipv6.fib_multipath_hash_policy": "1",
	})
}

// AddRoute adds (or replaces) a route to dst. One gateway gives a plain
// route; several give an equal-cost multipath route. The route is re-applied
// by Link.Restore, since a link going down deletes the routes through it.
func (ns *Namespace) AddRoute(dst netip.Prefix, via ...netip.Addr) error {
	if len(via) == 0 {
		return errors.New("testnet: AddRoute needs a gateway")
	}
	// The family comes from the prefix (0.0.0.0/0 or ::/0 for a default
	// route): ip -batch lines take no -4/-6 options.
	cmd := "route replace " + dst.Masked().String()
	if len(via) == 1 {
		cmd += " via " + via[0].String()
	} else {
		for _, v := range via {
			cmd += " nexthop via " + v.String()
		}
	}
	return ns.addSticky(cmd)
}

// addSticky runs an ip command now and remembers it for Link.Restore.
func (ns *Namespace) addSticky(cmd string) error {
	if err := ns.IP(cmd); err != nil {
		return err
	}
	ns.mu.Lock()
	ns.sticky = append(ns.sticky, cmd)
	ns.mu.Unlock()
	return nil
}

// reapply runs the remembered route and neighbour commands again.
func (ns *Namespace) reapply() error {
	ns.mu.Lock()
	cmds := append([]string(nil), ns.sticky...)
	ns.mu.Unlock()
	return ns.IP(cmds...)
}

// ListenUDP opens a UDP socket inside the namespace (network "udp4", "udp6"
// or "udp"). The socket stays in the namespace and can be used from any
// goroutine.
func (ns *Namespace) ListenUDP(network string, laddr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.Do(func() error {
		var err error
		c, err = net.ListenUDP(network, net.UDPAddrFromAddrPort(laddr))
		return err
	})
	return c, err
}

// Ifindex returns the index of interface name inside the namespace.
func (ns *Namespace) Ifindex(name string) (int, error) {
	var idx int
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		idx = ifi.Index
		return nil
	})
	return idx, err
}
