package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/config"
)

// Claims: before a daemon touches anything (removes a stale control
// socket, attaches XDP, binds a queue, opens the metrics port), it takes
// an exclusive flock on a file for its control socket and one for each
// interface it serves, and writes its pid there. A second daemon pointed
// at the same socket or interface finds the lock held, reads the pid and
// exits saying who serves it, having changed nothing. flock is released
// by the kernel when the process dies however it dies, so a stale file
// left by a kill -9 claims nothing.
//
// Interface claims live in one directory for the host (LockDir), named by
// the network namespace's inode and the interface name, since interface
// names repeat across namespaces (the demos run two daemons whose
// interfaces may share a name).

// LockDir holds the interface claims; a variable so tests can move it.
var LockDir = "/run/metaroced/locks"

// claim is one held lock file.
type claim struct {
	path string
	f    *os.File
}

// release drops the lock. The file stays: removing it would race with a
// new daemon that has just opened it.
func (c *claim) release() { c.f.Close() }

// ErrAlreadyServed is what a daemon that finds another serving its socket
// or interface fails with.
var ErrAlreadyServed = errors.New("already served")

// takeClaim locks path, or says which process holds it: what names the
// object ("control socket /run/metaroced/control.sock", "interface eth0").
func takeClaim(path, what string) (*claim, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock for %s: %w", what, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock for %s: %w", what, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b[:n]))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("metaroced (pid %s) %w: %s (lock %s); this daemon changed nothing", pid, ErrAlreadyServed, what, path)
		}
		return nil, fmt.Errorf("lock for %s: %s: %w", what, path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &claim{path: path, f: f}, nil
}

// claimAll checks that every configured interface exists in this network
// namespace and takes the claims, socket first. On error it holds none.
func claimAll(cfg *config.Config) ([]*claim, error) {
	var held []*claim
	fail := func(err error) ([]*claim, error) {
		for _, c := range held {
			c.release()
		}
		return nil, err
	}
	for i, ic := range cfg.Interfaces {
		if _, err := net.InterfaceByName(ic.Name); err != nil {
			return fail(fmt.Errorf("interfaces[%d].name %q: no such interface in this network namespace (have: %s)", i, ic.Name, ifaceNames()))
		}
	}
	c, err := takeClaim(cfg.ControlSocket+".lock", "control socket "+cfg.ControlSocket)
	if err != nil {
		return fail(err)
	}
	held = append(held, c)
	ns := "0"
	if st, err := os.Stat("/proc/thread-self/ns/net"); err == nil {
		if s, ok := st.Sys().(*syscall.Stat_t); ok {
			ns = strconv.FormatUint(s.Ino, 10)
		}
	}
	for _, ic := range cfg.Interfaces {
		for _, k := range ifaceKeys(ic, cfg.Port) {
			c, err := takeClaim(filepath.Join(LockDir, "netns"+ns+"-"+k.file+".lock"), k.what)
			if err != nil {
				return fail(err)
			}
			held = append(held, c)
		}
	}
	return held, nil
}

type ifaceKey struct{ file, what string }

// ifaceKeys names what a configured interface takes exclusively: each NIC
// queue for AF_XDP (and for auto, which tries AF_XDP first: a second
// daemon there would find the XDP program attached and quietly fall back
// to UDP), and the address and port for the UDP backend, so daemons on
// one interface with addresses of their own (loopback tests, several
// addresses on a port) still run side by side.
func ifaceKeys(ic config.Interface, port int) []ifaceKey {
	if ic.Backend == config.BackendUDP {
		addr := "default"
		if ic.Address.IsValid() {
			addr = ic.Address.String()
		}
		return []ifaceKey{{file: fmt.Sprintf("%s-udp-%s-%d", ic.Name, addr, port),
			what: fmt.Sprintf("interface %s, UDP %s port %d", ic.Name, addr, port)}}
	}
	var ks []ifaceKey
	for _, q := range ic.Queues {
		ks = append(ks, ifaceKey{file: fmt.Sprintf("%s-q%d", ic.Name, q), what: fmt.Sprintf("interface %s queue %d", ic.Name, q)})
	}
	return ks
}

func ifaceNames() string {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		return "none"
	}
	names := make([]string, len(ifs))
	for i, ifi := range ifs {
		names[i] = ifi.Name
	}
	return strings.Join(names, ", ")
}
