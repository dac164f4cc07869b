package testnet

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Prefix starts the name of every namespace this package creates. Sweep
// deletes only namespaces whose name starts with it.
const Prefix = "mrtn-"

// netnsDir is where ip netns keeps its named namespaces (bind mounts).
const netnsDir = "/run/netns"

// counter makes names unique within a process.
var counter atomic.Uint32

// sweepOnce runs Sweep once per process, before the first Net is built.
var sweepOnce sync.Once

// Net is a set of namespaces and the veth pairs between them. All methods are
// safe for concurrent use; they are cold-path (each runs commands).
type Net struct {
	mu     sync.Mutex
	nss    []*Namespace // in creation order; Close deletes in reverse
	closed bool
}

// Open starts an empty Net for use outside tests (the demo). The caller must
// call Close; a crashed caller's namespaces are removed by the next Sweep.
func Open() (*Net, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("testnet: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for ip netns)")
	}
	// The tools the namespaces are built with, and the Debian package of
	// each: a missing one is named, never a bare exec error later.
	for _, t := range [][2]string{{"ip", "iproute2"}, {"tc", "iproute2"}, {"nft", "nftables"}, {"sysctl", "procps"}} {
		if _, err := exec.LookPath(t[0]); err != nil {
			return nil, fmt.Errorf("testnet: %s not found: install the Debian package %s (make deps)", t[0], t[1])
		}
	}
	sweepOnce.Do(func() { _ = Sweep() })
	return &Net{}, nil
}

// New starts an empty Net for a test and registers its Close with t.Cleanup,
// so it is torn down even when the test fails or panics. It skips the test,
// with the reason, when not root.
func New(t testing.TB) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("testnet: needs root to create network namespaces")
	}
	n, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("testnet close: %v", err)
		}
	})
	return n
}

// Close kills the processes left inside the Net's namespaces (never this
// process) and deletes the namespaces, which destroys their interfaces. It is
// idempotent and tries every namespace even when one fails.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	nss := n.nss
	n.nss = nil
	n.mu.Unlock()

	var errs []error
	for i := len(nss) - 1; i >= 0; i-- {
		if err := deleteNamespace(nss[i].Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Namespaces lists the Net's namespaces in creation order.
func (n *Net) Namespaces() []*Namespace {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Namespace(nil), n.nss...)
}

// AddNamespace creates a namespace whose name ends in label (letters and
// digits; other characters are dropped). Loopback is brought up, IPv6 DAD is
// turned off for every interface created later, and IPv6 addresses are kept
// when a link goes down.
func (n *Net) AddNamespace(label string) (*Namespace, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("testnet: net is closed")
	}
	n.mu.Unlock()

	name := namespaceName(label)
	if _, err := run("ip", "netns", "add", name); err != nil {
		return nil, err
	}
	ns := &Namespace{Name: name, Label: label, net: n}
	n.mu.Lock()
	n.nss = append(n.nss, ns)
	n.mu.Unlock()

	if err := ns.IP("link set lo up"); err != nil {
		return nil, err
	}
	if err := ns.Sysctl(map[string]string{
		"net.ipv6.conf.all.accept_dad":            "0",
		"net.ipv6.conf.default.accept_dad":        "0",
		"net.ipv6.conf.all.keep_addr_on_down":     "1",
		"net.ipv6.conf.default.keep_addr_on_down": "1",
		// Router advertisements and autoconf would add addresses and routes
		// nobody asked for.
		"net.ipv6.conf.all.accept_ra":     "0",
		"net.ipv6.conf.default.accept_ra": "0",
		"net.ipv6.conf.default.autoconf":  "0",
	}); err != nil {
		return nil, err
	}
	return ns, nil
}

// namespaceName returns Prefix + pid-start-<n><rand>-label.
func namespaceName(label string) string {
	var r [1]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s%d-%s-%d%s-%s", Prefix, os.Getpid(), selfStart(),
		counter.Add(1), hex.EncodeToString(r[:]), sanitize(label))
}

// ifaceName returns a unique interface name of at most 15 bytes (IFNAMSIZ-1):
// "m" + pid in base 36 + "x" + counter in base 36 + 2 random hex digits + side.
func ifaceName(pid int, n uint32, rnd byte, side byte) string {
	s := fmt.Sprintf("m%sx%s%02x%c", strconv.FormatInt(int64(pid), 36),
		strconv.FormatUint(uint64(n), 36), rnd, side)
	if len(s) > 15 {
		// Only reachable with a counter beyond 36^5: keep the unique tail.
		s = "m" + s[len(s)-14:]
	}
	return s
}

func sanitize(label string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(label) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "ns"
	}
	return b.String()
}

// selfStart is this process's start time in clock ticks since boot, base 36.
// Together with the pid it identifies a process for Sweep even after the pid
// is reused.
var selfStart = sync.OnceValue(func() string {
	st, _ := processStart(os.Getpid())
	return st
})

// processStart reads field 22 (starttime) of /proc/pid/stat, in base 36.
func processStart(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// comm (field 2) may contain spaces and parentheses: skip past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return "", fmt.Errorf("parse /proc/%d/stat", pid)
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return "", fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return strconv.FormatUint(v, 36), nil
}

// Sweep deletes namespaces left behind by earlier runs that crashed: only
// those whose name starts with Prefix and whose creating process (pid and
// start time, both in the name) is gone. Processes still inside such a
// namespace are killed first. It returns the names it deleted.
func Sweep() error {
	_, err := sweep()
	return err
}

func sweep() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, Prefix) || !stale(name) {
			continue
		}
		if err := deleteNamespace(name); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, name)
	}
	return deleted, errors.Join(errs...)
}

// stale reports whether the process that created namespace name is gone. A
// name that does not parse is not ours to judge and is left alone.
func stale(name string) bool {
	f := strings.SplitN(strings.TrimPrefix(name, Prefix), "-", 3)
	if len(f) < 3 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	st, err := processStart(pid)
	if err != nil {
		return true // no such process
	}
	return st != f[1] // the pid was reused by another process
}

// deleteNamespace kills what runs inside the namespace, except this process,
// and removes its name. The kernel destroys the namespace, and the
// interfaces in it, once nothing references it any more.
func deleteNamespace(name string) error {
	if out, err := run("ip", "netns", "pids", name); err == nil {
		self := os.Getpid()
		for _, f := range strings.Fields(out) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid == self {
				continue
			}
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
	_, err := run("ip", "netns", "del", name)
	return err
}

// run runs a command and returns its standard output; the error carries the
// command line and its standard error.
func run(name string, args ...string) (string, error) {
	return runInput(nil, name, args...)
}

func runInput(stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		in := ""
		if stdin != nil {
			in = fmt.Sprintf(" <<%q", truncate(string(stdin), 400))
		}
		return stdout.String(), fmt.Errorf("%s %s%s: %w: %s", name, strings.Join(args, " "), in, err, msg)
	}
	return stdout.String(), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
