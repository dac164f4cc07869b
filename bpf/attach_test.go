package bpf

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// attach attaches p inside ns and returns the attachment.
func attach(ns *netns, p *Program, ifindex int, mode Mode) (Attachment, error) {
	var a Attachment
	err := ns.do(func() (err error) {
		a, err = p.Attach(ifindex, mode)
		return err
	})
	return a, err
}

func progID(t *testing.T, p *Program) ebpf.ProgramID {
	t.Helper()
	info, err := p.prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("kernel reports no program ID")
	}
	return id
}

// shownXDP returns what `ip -j link show dev DEV` says is attached to dev, as
// "native id N" or "generic id N", or "" when nothing is.
func shownXDP(ns *netns, dev string) string {
	ns.t.Helper()
	var links []struct {
		XDP *struct {
			Mode int `json:"mode"` // enum XDP_ATTACHED_*
			Prog struct {
				ID int `json:"id"`
			} `json:"prog"`
		} `json:"xdp"`
	}
	out := ns.ip("-j", "link", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		ns.t.Fatalf("parse ip -j link show %s: %v: %s", dev, err, out)
	}
	x := links[0].XDP
	if x == nil {
		return ""
	}
	mode := map[int]string{1: "native", 2: "generic", 3: "offload"}[x.Mode]
	return fmt.Sprintf("%s id %d", mode, x.Prog.ID)
}

func TestAttachNative(t *testing.T) {
	ns := newNetns(t)
	ifindex, _ := ns.veth("mr0", "mr1", 1)
	p := load(t, Options{})

	a, err := attach(ns, p, ifindex, ModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != ModeNative || a.NativeErr != nil || a.Ifindex != ifindex {
		t.Fatalf("attachment %+v, want native mode on ifindex %d (veth supports native XDP)", a, ifindex)
	}
	want := fmt.Sprintf("native id %d", progID(t, p))
	if got := shownXDP(ns, "mr0"); got != want {
		t.Fatalf("ip link show: %q, want %q", got, want)
	}
	if _, err := attach(ns, p, ifindex, ModeAuto); err == nil {
		t.Error("second Attach of the same program succeeded")
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := shownXDP(ns, "mr0"); got != "" {
		t.Errorf("after Close, ip link show: %q, want no program", got)
	}
}

func TestAttachGeneric(t *testing.T) {
	ns := newNetns(t)
	ifindex, _ := ns.veth("mr0", "mr1", 1)
	p := load(t, Options{})

	a, err := attach(ns, p, ifindex, ModeGeneric)
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != ModeGeneric {
		t.Fatalf("mode %v, want generic", a.Mode)
	}
	want := fmt.Sprintf("generic id %d", progID(t, p))
	if got := shownXDP(ns, "mr0"); got != want {
		t.Fatalf("ip link show: %q, want %q", got, want)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := shownXDP(ns, "mr0"); got != "" {
		t.Errorf("after Close, ip link show: %q, want no program", got)
	}
}

// TestAttachJumboMTU checks the reason for the frags variant: at MTU 9000 the
// plain program is refused in native mode (ERANGE) and ModeAuto falls back to
// generic, saying why; the frags program attaches natively.
func TestAttachJumboMTU(t *testing.T) {
	ns := newNetns(t)
	ifindex, _ := ns.veth("mr0", "mr1", 1)
	ns.ip("link", "set", "mr0", "mtu", "9000")
	ns.ip("link", "set", "mr1", "mtu", "9000")

	t.Run("xdp", func(t *testing.T) {
		p := load(t, Options{})
		if _, err := attach(ns, p, ifindex, ModeNative); !errors.Is(err, unix.ERANGE) {
			t.Errorf("native attach at MTU 9000: %v, want ERANGE", err)
		}
		a, err := attach(ns, p, ifindex, ModeAuto)
		if err != nil {
			t.Fatal(err)
		}
		if a.Mode != ModeGeneric || !errors.Is(a.NativeErr, unix.ERANGE) {
			t.Errorf("attachment %+v, want generic with native refused by ERANGE", a)
		}
		p.Close()
	})
	t.Run("xdp.frags", func(t *testing.T) {
		p := load(t, Options{Frags: true})
		a, err := attach(ns, p, ifindex, ModeAuto)
		if err != nil {
			t.Fatal(err)
		}
		if a.Mode != ModeNative || a.NativeErr != nil {
			t.Errorf("attachment %+v, want native", a)
		}
	})
}

// TestAttachLeavesOthersAlone checks that Attach never replaces an XDP
// program it did not attach, whether that one came through a bpf_link or
// through netlink, and that Close only removes its own.
func TestAttachLeavesOthersAlone(t *testing.T) {
	t.Run("bpf_link", func(t *testing.T) {
		ns := newNetns(t)
		ifindex, _ := ns.veth("mr0", "mr1", 1)
		first := load(t, Options{})
		if _, err := attach(ns, first, ifindex, ModeAuto); err != nil {
			t.Fatal(err)
		}
		want := shownXDP(ns, "mr0")

		second := load(t, Options{})
		a, err := attach(ns, second, ifindex, ModeAuto)
		if err == nil {
			t.Fatalf("second program attached over the first: %+v", a)
		}
		if !errors.Is(err, unix.EBUSY) {
			t.Errorf("refused with %v, want EBUSY", err)
		}
		second.Close()
		if got := shownXDP(ns, "mr0"); got != want {
			t.Errorf("after the failed attach: %q, want %q", got, want)
		}
	})
	t.Run("netlink", func(t *testing.T) {
		ns := newNetns(t)
		ifindex, _ := ns.veth("mr0", "mr1", 1)
		// Someone else's program, attached the old way by iproute2
		// (it loads its own copy of the committed object).
		if out, err := ns.tryIP("link", "set", "dev", "mr0", "xdpdrv", "obj", "steer_bpfel.o", "sec", "xdp"); err != nil {
			t.Skipf("iproute2 cannot attach an object file here: %v: %s", err, out)
		}
		want := shownXDP(ns, "mr0")
		if want == "" {
			t.Fatal("iproute2 attach left no program")
		}

		p := load(t, Options{})
		a, err := attach(ns, p, ifindex, ModeAuto)
		if err == nil {
			t.Fatalf("attached over a netlink program: %+v", a)
		}
		if !errors.Is(err, unix.EBUSY) {
			t.Errorf("refused with %v, want EBUSY", err)
		}
		p.Close()
		if got := shownXDP(ns, "mr0"); got != want {
			t.Errorf("foreign program changed: %q, want %q", got, want)
		}
	})
}

// TestTraffic sends frames into a veth whose peer runs the program in native
// mode and checks the counters move: the program really sits on the receive
// path, and rx_queue_index 0 selects slot 0 of the map.
func TestTraffic(t *testing.T) {
	ns := newNetns(t)
	ifindex, peer := ns.veth("mr0", "mr1", 1)
	p := load(t, Options{})
	if a, err := attach(ns, p, ifindex, ModeNative); err != nil {
		t.Fatal(err)
	} else if a.Mode != ModeNative {
		t.Fatalf("mode %v", a.Mode)
	}

	// A raw packet socket on the peer, created inside the namespace.
	var sock int
	err := ns.do(func() (err error) {
		sock, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	send := func(frame []byte) {
		t.Helper()
		to := &unix.SockaddrLinklayer{Ifindex: peer, Halen: 6}
		copy(to.Addr[:], macDst)
		if err := unix.Sendto(sock, frame, 0, to); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	// waitFor polls until the counters reach want: NAPI runs the program
	// asynchronously to the send. Passed is a lower bound, since the
	// kernel may send frames of its own (ND, MLD) through the program.
	waitFor := func(want Counters) {
		t.Helper()
		var got Counters
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got = counters(t, p)
			others := got
			others.Passed = want.Passed
			if others == want && got.Passed >= want.Passed {
				return
			}
		}
		t.Fatalf("counters %+v, want %+v", got, want)
	}

	mr := packet{dport: DefaultPort, payload: metaroce(1, 64)}.frame()
	for range 3 {
		send(mr)
	}
	send(packet{dport: 53, payload: metaroce(1, 64)}.frame())
	send(packet{dport: DefaultPort, payload: metaroce(2, 64)}.frame())
	waitFor(Counters{RedirectFailed: 3, Passed: 1, DroppedVersion: 1})

	if err := p.SetSocket(0, xskSocket(t)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		send(mr)
	}
	waitFor(Counters{Redirected: 2, RedirectFailed: 3, Passed: 1, DroppedVersion: 1})
}

// TestQueueIndex checks that the socket is chosen by the RX queue: on a
// four-queue veth, a test run that claims to arrive on queue 2 reaches the
// socket in slot 2, and queue 1, with an empty slot, falls back to the kernel.
func TestQueueIndex(t *testing.T) {
	ns := newNetns(t)
	ifindex, _ := ns.veth("mr0", "mr1", 4)
	p := load(t, Options{})
	if err := p.SetSocket(2, xskSocket(t)); err != nil {
		t.Fatal(err)
	}
	frame := packet{dport: DefaultPort, payload: metaroce(1, 64)}.frame()

	actions := map[uint32]uint32{}
	before := counters(t, p)
	err := ns.do(func() error {
		for _, q := range []uint32{1, 2, 3} {
			// The kernel resolves the ingress ifindex in this
			// thread's namespace and checks the queue exists.
			ctx := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex), RxQueueIndex: q}
			a, err := p.prog.Run(&ebpf.RunOptions{Data: frame, Context: ctx})
			if err != nil {
				return fmt.Errorf("queue %d: %w", q, err)
			}
			actions[q] = a
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]uint32{1: xdpPass, 2: xdpRedirect, 3: xdpPass}
	for q, a := range want {
		if actions[q] != a {
			t.Errorf("queue %d: %s, want %s", q, actionNames[actions[q]], actionNames[a])
		}
	}
	if got := counters(t, p).sub(before); got != (Counters{Redirected: 1, RedirectFailed: 2}) {
		t.Errorf("counters moved by %+v", got)
	}
}
