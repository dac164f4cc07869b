package xsk

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/metaroce/metaroce/internal/testnet"
	"golang.org/x/sys/unix"
)

// testPort is the UDP destination port the test XDP program steals; all other
// traffic (ARP, ND) still reaches the namespaces' kernel stacks.
const testPort = 4791

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, BPF programs and AF_XDP sockets (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW)")
	}
}

// end is one side of a test: a host, the XDP program on its interface and an
// AF_XDP socket on one of its queues.
type end struct {
	host    *testnet.Host
	ifindex int
	queue   uint32
	prog    *ebpf.Program
	xsks    *ebpf.Map
	lnk     link.Link
	sock    *Socket
}

// attach loads the redirect program and attaches it in native mode through a
// bpf_link, inside the host's namespace. Everything is closed by t.Cleanup,
// and the link would detach anyway when the process dies or the namespace is
// deleted.
func attach(t testing.TB, h *testnet.Host, queues int, frags bool) *end {
	t.Helper()
	prog, xsks, err := loadRedirect(testPort, queues, frags, xdpPass)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close(); xsks.Close() })
	e := &end{host: h, prog: prog, xsks: xsks}
	if err := h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Port.Name)
		if err != nil {
			return err
		}
		e.ifindex = ifi.Index
		e.lnk, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		t.Fatalf("attach xdp to %s: %v", h.Port, err)
	}
	t.Cleanup(func() { e.lnk.Close() })
	return e
}

// open binds an AF_XDP socket to queue q of the end's interface and puts it
// in the XSKMAP.
func (e *end) open(t testing.TB, q uint32, cfg Config) {
	t.Helper()
	var s *Socket
	if err := e.host.Do(func() error {
		var err error
		s, err = Open(e.ifindex, q, cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := e.xsks.Put(q, uint32(s.FD())); err != nil {
		t.Fatalf("xskmap put: %v", err)
	}
	e.sock, e.queue = s, q
	t.Logf("%s: %v", e.host.Port, s.Info())
}

// newPair builds two namespaces joined by a veth pair with the program and a
// socket on queue q of each side.
func newPair(t testing.TB, cfg Config, link testnet.LinkConfig, q uint32, frags bool) (a, b *end) {
	t.Helper()
	needRoot(t)
	p := testnet.NewPair(t, testnet.Config{Link: link, StaticNeighbors: true})
	queues := max(link.Queues, 1)
	a, b = attach(t, p.A, queues, frags), attach(t, p.B, queues, frags)
	a.open(t, q, cfg)
	b.open(t, q, cfg)
	return a, b
}

func (e *end) spec(to *end, v6 bool) frameSpec {
	f := frameSpec{srcMAC: e.host.Port.MAC, dstMAC: to.host.Port.MAC, sport: 40000, dport: testPort}
	if v6 {
		f.src, f.dst = e.host.IPv6, to.host.IPv6
	} else {
		f.src, f.dst = e.host.IPv4, to.host.IPv4
	}
	return f
}

// exchange sends n frames from a to b in TX batches of txBatch and receives
// them in RX batches of rxBatch, with payload sizes cycling through sizes. It
// checks every byte of every frame and that each arrives once, then drains
// completions and checks that both pools account for every frame. The
// sender keeps at most a fill ring's worth of frames unreceived, so that
// no frame is dropped for want of a fill-ring slot.
func exchange(t *testing.T, a, b *end, n, txBatch, rxBatch int, sizes []int, v6 bool) {
	t.Helper()
	tx, rx := a.sock, b.sock
	f := a.spec(b, v6)
	if _, err := rx.Refill(rx.Pool().Free()); err != nil {
		t.Fatal(err)
	}

	descs := make([]Desc, txBatch)
	got := make([]Desc, rxBatch)
	seen := make([]bool, n)
	want := make([]byte, 9216)
	sent, received, outOfOrder := 0, 0, 0
	var next uint64
	deadline := time.Now().Add(10 * time.Second)
	for received < n && time.Now().Before(deadline) {
		tx.Complete()
		// Send a batch, from frames of the sender's pool.
		window := int(rx.Fill.Size()) - (sent - received)
		k := 0
		for ; k < min(txBatch, window) && sent+k < n; k++ {
			addr, ok := tx.Pool().Get()
			if !ok {
				break
			}
			seq := uint64(sent + k)
			l := f.build(tx.FrameBuf(addr), seq, sizes[int(seq)%len(sizes)])
			descs[k] = Desc{Addr: addr, Len: uint32(l)}
		}
		q, err := tx.Transmit(descs[:k])
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range descs[q:k] {
			tx.Pool().Put(d.Addr)
		}
		sent += q
		if q == 0 {
			if err := tx.KickTX(); err != nil {
				t.Fatal(err)
			}
		}

		// Receive everything that arrived, rxBatch at a time.
		for {
			m := rx.Receive(got)
			if m == 0 {
				break
			}
			for _, d := range got[:m] {
				fr := rx.Frame(d.Addr, d.Len)
				seq, ok := seqOf(fr)
				if !ok || seq >= uint64(n) {
					t.Fatalf("frame of %d bytes with no valid sequence number", d.Len)
				}
				if seen[seq] {
					t.Fatalf("frame %d received twice", seq)
				}
				seen[seq] = true
				if seq != next {
					outOfOrder++
				}
				next = seq + 1
				l := f.build(want, seq, sizes[int(seq)%len(sizes)])
				if !bytes.Equal(fr, want[:l]) {
					t.Fatalf("frame %d differs:\n got %x\nwant %x", seq, fr, want[:l])
				}
				if d.Addr-rx.Pool().FrameStart(d.Addr) != rx.RxOffset() {
					t.Fatalf("frame %d at offset %d into its frame, want %d", seq, d.Addr%2048, rx.RxOffset())
				}
				rx.Pool().Put(d.Addr)
			}
			received += m
			if _, err := rx.Refill(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if received < n {
		st, _ := rx.Stats()
		t.Fatalf("received %d of %d (sent %d); receiver stats %+v", received, n, sent, st)
	}
	if outOfOrder > 0 {
		t.Logf("%d frames out of order", outOfOrder)
	}

	// Every TX frame comes back through the completion ring.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		tx.Complete()
		if _, inTx := tx.InFlight(); inTx == 0 {
			break
		}
		_ = tx.KickTX()
		time.Sleep(time.Millisecond)
	}
	for _, e := range []*end{a, b} {
		s := e.sock
		inRx, inTx := s.InFlight()
		if inTx != 0 || s.Pool().Free()+int(inRx) != s.Pool().Cap() {
			t.Errorf("%s leaks frames: pool %d + fill/rx %d + tx %d != %d",
				e.host.Port, s.Pool().Free(), inRx, inTx, s.Pool().Cap())
		}
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.RxInvalidDescs+st.TxInvalidDescs != 0 {
			t.Errorf("%s: invalid descriptors: %+v", e.host.Port, st)
		}
	}
}

func TestSendReceive(t *testing.T) {
	a, b := newPair(t, Config{}, testnet.LinkConfig{}, 0, false)
	if a.sock.Info().ZeroCopy {
		t.Log("zero-copy on veth: unexpected")
	}
	if a.sock.Info().ZeroCopyErr == nil {
		t.Logf("zero-copy not refused: %v", a.sock.Info())
	}
	sizes := []int{18, 100, 1000, 1452, 1, 512} // 60 to 1514-byte frames (IPv6: 1500 MTU = 40 + 8 + 1452)
	t.Run("ipv4", func(t *testing.T) { exchange(t, a, b, 3000, 64, 64, sizes, false) })
	t.Run("ipv6", func(t *testing.T) { exchange(t, a, b, 3000, 64, 64, sizes, true) })
	t.Run("reverse", func(t *testing.T) { exchange(t, b, a, 1000, 32, 17, sizes, false) })

	c := a.sock.Counters()
	t.Logf("sender counters %+v", c)
	if a.sock.Info().NeedWakeup && c.TxKicks == 0 {
		t.Error("no TX kick with need_wakeup: veth keeps the TX flag set")
	}
	if !a.sock.TX.NeedWakeup() {
		t.Log("TX need_wakeup flag clear after sending")
	}
	t.Logf("fill ring need_wakeup flag: %v (never set on veth in copy mode)", b.sock.Fill.NeedWakeup())
}

func TestRingWraparound(t *testing.T) {
	// Small rings and few frames: 20 times round each ring, in batches
	// that do not divide the ring size.
	cfg := Config{FillSize: 64, CompletionSize: 64, RxSize: 64, TxSize: 64, NumFrames: 160}
	a, b := newPair(t, cfg, testnet.LinkConfig{}, 0, false)
	exchange(t, a, b, 64*20, 48, 40, []int{18, 200}, false)
	if p := a.sock.TX.prod; p < 64*20 {
		t.Fatalf("TX producer at %d: the ring did not wrap", p)
	}
	if c := b.sock.RX.cons; c < 64*20 {
		t.Fatalf("RX consumer at %d: the ring did not wrap", c)
	}
}

func TestNoNeedWakeup(t *testing.T) {
	a, b := newPair(t, Config{NoNeedWakeup: true}, testnet.LinkConfig{}, 0, false)
	if a.sock.Info().NeedWakeup {
		t.Fatal("bound with need_wakeup")
	}
	exchange(t, a, b, 500, 64, 64, []int{18}, false)
	if c := a.sock.Counters(); c.TxKicks == 0 {
		t.Error("no kicks without need_wakeup")
	}
	// Kernel 6.18 sets the TX flag in copy mode even without
	// XDP_USE_NEED_WAKEUP; the flag means nothing then and Transmit ignores it.
	t.Logf("TX need_wakeup flag without XDP_USE_NEED_WAKEUP: %v", a.sock.TX.NeedWakeup())
}

// TestBusyPollOptions opens sockets with the busy-poll options, which root
// may set, and checks traffic still flows; the Info line says what was set.
func TestBusyPollOptions(t *testing.T) {
	a, b := newPair(t, Config{BusyPoll: &BusyPoll{}}, testnet.LinkConfig{}, 0, false)
	if err := a.sock.Info().BusyPollErr; err != nil {
		t.Logf("busy poll refused: %v", err)
	}
	exchange(t, a, b, 500, 64, 64, []int{18}, false)
}

func TestWaitAndStats(t *testing.T) {
	a, b := newPair(t, Config{}, testnet.LinkConfig{}, 0, false)

	// An empty fill ring: frames are dropped and counted.
	f := a.spec(b, false)
	send := func(n int) {
		t.Helper()
		descs := make([]Desc, n)
		for i := range descs {
			addr, _ := a.sock.Pool().Get()
			descs[i] = Desc{Addr: addr, Len: uint32(f.build(a.sock.FrameBuf(addr), uint64(i), 18))}
		}
		if q, err := a.sock.Transmit(descs); err != nil || q != n {
			t.Fatalf("Transmit = %d, %v", q, err)
		}
	}
	send(10)
	time.Sleep(20 * time.Millisecond)
	st, err := b.sock.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("receiver stats with an empty fill ring: %+v", st)
	if st.RxFillRingEmptyDescs+st.RxDropped == 0 {
		t.Errorf("10 frames to an empty fill ring not counted: %+v", st)
	}

	// Idle: Wait times out.
	if _, err := b.sock.Refill(64); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ready, err := b.sock.Wait(30*time.Millisecond, false)
	if err != nil || ready {
		t.Fatalf("idle Wait = %v, %v", ready, err)
	}
	if d := time.Since(t0); d < 25*time.Millisecond {
		t.Errorf("Wait returned after %v", d)
	}
	// A frame arrives: Wait wakes.
	send(1)
	ready, err = b.sock.Wait(time.Second, false)
	if err != nil || !ready {
		t.Fatalf("Wait with a frame = %v, %v", ready, err)
	}
	got := make([]Desc, 4)
	if n := b.sock.Receive(got); n != 1 {
		t.Fatalf("received %d", n)
	}
	if c := b.sock.Counters(); c.Waits != 2 {
		t.Errorf("waits %d", c.Waits)
	}
	// The syscall paths allocate nothing either.
	descs := make([]Desc, 8)
	allocs := testing.AllocsPerRun(200, func() {
		k := 0
		for ; k < len(descs); k++ {
			addr, ok := a.sock.Pool().Get()
			if !ok {
				break
			}
			descs[k] = Desc{Addr: addr, Len: uint32(f.build(a.sock.FrameBuf(addr), 0, 18))}
		}
		q, _ := a.sock.Transmit(descs[:k])
		for _, d := range descs[q:k] {
			a.sock.Pool().Put(d.Addr)
		}
		_ = a.sock.KickTX()
		a.sock.Complete()
		_, _ = b.sock.Wait(0, false)
		n := b.sock.Receive(got)
		for _, d := range got[:n] {
			b.sock.Pool().Put(d.Addr)
		}
		_, _ = b.sock.Refill(n)
		_ = b.sock.wakeRX()
	})
	if allocs != 0 {
		t.Errorf("%v allocs per transmit/receive/wait loop", allocs)
	}

	// WakeRX with the flag clear makes no syscall; the raw wake works.
	if err := b.sock.WakeRX(); err != nil {
		t.Error(err)
	}
	if err := b.sock.wakeRX(); err != nil {
		t.Errorf("recvfrom wake: %v", err)
	}
}

// TestCloseRebind closes a socket and binds the same queue again at once,
// which the kernel refuses with EBUSY for a few milliseconds; Open retries.
func TestCloseRebind(t *testing.T) {
	a, b := newPair(t, Config{}, testnet.LinkConfig{}, 0, false)
	for i := 0; i < 5; i++ {
		old := b.sock
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		if err := old.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		b.open(t, 0, Config{})
		info := b.sock.Info()
		t.Logf("rebind %d: %d attempts, waited %v", i, info.BindAttempts, info.BindWait)
	}
	exchange(t, a, b, 500, 64, 64, []int{18, 1000}, false)

	// Without retries the EBUSY shows.
	b.sock.Close()
	err := b.host.Do(func() error {
		s, err := Open(b.ifindex, 0, Config{BindTimeout: time.Nanosecond})
		if err == nil {
			s.Close()
		}
		return err
	})
	if err != nil && !errors.Is(err, unix.EBUSY) {
		t.Fatalf("immediate rebind failed with %v, want EBUSY or success", err)
	}
	t.Logf("immediate rebind without retry: %v", err)
}

// TestSecondQueue binds queue 1 of 2 on each side: in native mode a frame
// sent on queue q arrives on the peer's queue q.
func TestSecondQueue(t *testing.T) {
	a, b := newPair(t, Config{}, testnet.LinkConfig{Queues: 2}, 1, false)
	exchange(t, a, b, 500, 64, 64, []int{18, 700}, true)
}

// TestJumbo sends 9014-byte frames (MTU 9000) from TX spans as three chained
// TX descriptors (Split) and receives them as chained RX descriptors
// (XDP_USE_SG, a program with BPF_F_XDP_HAS_FRAGS) that an Assembler
// gathers, every byte compared.
func TestJumbo(t *testing.T) {
	cfg := Config{SG: true, FrameSize: 4096, NumFrames: 1024, TxSpans: 64, SpanFrames: 3}
	a, b := newPair(t, cfg, testnet.LinkConfig{MTU: 9000}, 0, true)
	tx, rx := a.sock, b.sock
	if _, err := rx.Refill(rx.Pool().Free()); err != nil {
		t.Fatal(err)
	}
	f := a.spec(b, false)
	const n = 200
	want := make([]byte, 9014)
	var descs [3]Desc
	var asm Assembler
	scratch := make([]byte, 0, 9018)
	received, chained := 0, 0
	var firstChain []uint32
	deadline := time.Now().Add(10 * time.Second)
	for seq := 0; received < n && time.Now().Before(deadline); {
		tx.Complete()
		if seq < n {
			if addr, ok := tx.GetSpan(); ok {
				l := f.build(tx.SpanBuf(addr), uint64(seq), 9014-42)
				k := tx.Pool().Split(addr, uint32(l), descs[:])
				q, err := tx.Transmit(descs[:k])
				if err != nil {
					t.Fatal(err)
				}
				if q != k {
					if q != 0 {
						t.Fatalf("queued %d of %d descriptors of one packet", q, k)
					}
					tx.PutSpan(addr)
				} else {
					seq++
				}
			}
		}
		var got [16]Desc
		m := rx.Receive(got[:])
		for _, d := range got[:m] {
			if asm.Idle() {
				asm.Start(scratch)
			}
			if d.More() {
				chained++
			}
			if received == 0 {
				firstChain = append(firstChain, d.Len)
			}
			pkt, st := asm.Add(rx.Frame(d.Addr, d.Len), d.More())
			rx.Pool().Put(d.Addr)
			if st == AsmMore {
				continue
			}
			if st != AsmDone {
				t.Fatalf("chain dropped: %v", st)
			}
			s, _ := seqOf(pkt)
			l := f.build(want, s, 9014-42)
			if s != uint64(received) || !bytes.Equal(pkt, want[:l]) {
				t.Fatalf("jumbo %d (want %d): %d bytes, equal %v", s, received, len(pkt), bytes.Equal(pkt, want[:l]))
			}
			received++
		}
		if _, err := rx.Refill(m); err != nil {
			t.Fatal(err)
		}
	}
	if received < n {
		st, _ := rx.Stats()
		t.Fatalf("received %d of %d jumbo frames; stats %+v", received, n, st)
	}
	if chained < 2*n {
		t.Errorf("%d continued descriptors for %d jumbo frames: want at least 2 each", chained, n)
	}
	t.Logf("a 9014-byte frame arrived as descriptors of %v bytes", firstChain)
	for time.Now().Before(deadline) && tx.SpansFree() < tx.SpansCap() {
		tx.Complete()
		time.Sleep(time.Millisecond)
	}
	if tx.SpansFree() != tx.SpansCap() {
		t.Errorf("%d of %d tx spans never came back", tx.SpansCap()-tx.SpansFree(), tx.SpansCap())
	}
}
