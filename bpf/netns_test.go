package bpf

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// netns is a network namespace made for one test with `ip netns add` and
// deleted, with every interface in it, when the test ends. Tests only ever
// create and touch interfaces inside such namespaces.
type netns struct {
	t    *testing.T
	name string
}

var netnsSeq atomic.Int32

func newNetns(t *testing.T) *netns {
	t.Helper()
	requireBPF(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 (ip) is not installed")
	}
	// Unique per process and test; a crashed run leaves a name with its
	// own pid, which `ip netns list` shows.
	name := fmt.Sprintf("metaroce-bpf-%d-%d", os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("delete netns %s: %v: %s", name, err, out)
		}
	})
	return &netns{t: t, name: name}
}

// ip runs `ip -n NS args...` and returns its output, failing the test on error.
func (ns *netns) ip(args ...string) string {
	ns.t.Helper()
	out, err := ns.tryIP(args...)
	if err != nil {
		ns.t.Fatal(err)
	}
	return out
}

func (ns *netns) tryIP(args ...string) (string, error) {
	args = append([]string{"-n", ns.name}, args...)
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// veth creates an up veth pair a, b with the given number of queues per
// direction and returns their interface indexes inside the namespace.
func (ns *netns) veth(a, b string, queues int) (ifa, ifb int) {
	ns.t.Helper()
	q := fmt.Sprint(queues)
	ns.ip("link", "add", a, "numtxqueues", q, "numrxqueues", q,
		"type", "veth", "peer", "name", b, "numtxqueues", q, "numrxqueues", q)
	for _, dev := range []string{a, b} {
		// No IPv6 addresses, so the kernel sends no DAD or router
		// solicitations of its own through the program under test.
		ns.ip("link", "set", dev, "addrgenmode", "none")
		ns.ip("link", "set", dev, "up")
	}
	return ns.ifindex(a), ns.ifindex(b)
}

func (ns *netns) ifindex(dev string) int {
	ns.t.Helper()
	var links []struct {
		Ifindex int `json:"ifindex"`
	}
	out := ns.ip("-j", "link", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		ns.t.Fatalf("parse ip -j link show %s: %v: %s", dev, err, out)
	}
	return links[0].Ifindex
}

// do runs fn on an OS thread inside the namespace and returns its error.
// Interface indexes passed to the kernel are resolved in the calling
// thread's namespace; fds fn creates (links, sockets) work from any thread
// afterwards. The thread is never unlocked, so the Go runtime discards it
// when fn returns instead of reusing a thread in the wrong namespace.
func (ns *netns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns.name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
