package control

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
)

// The daemon's own resource budget, enforced before the kernel's, for
// four resources:
//
//   - memory mappings: every region is one, every queue pair two (its
//     rings; one on a shared completion queue) and every shared
//     completion queue one. Past vm.max_map_count the Go runtime itself cannot map
//     memory and the daemon dies ("fatal error: runtime: cannot allocate
//     memory", issue 22, at 65,445 registrations).
//   - descriptors: a queue pair holds one for its life (the daemon's
//     doorbell end) and three more until its create_qp reply has gone
//     (the rings' memfds and the application's doorbell end, which the
//     reply carries). Past RLIMIT_NOFILE accepts and creates fail
//     everywhere ("too many open files" at 4,943 queue pairs).
//   - ring memory: the rings' bytes and what the daemon keeps per
//     completion-queue slot (a completion waiting for room, a work
//     request's tag with its inline data); a 65,536-slot queue pair is
//     about 10 MiB, so slots alone bound nothing.
//   - registered memory: the bytes of regions mapped into the daemon
//     (made resident at registration).
//
// The totals come from the process's limits at start: mappings are
// vm.max_map_count and descriptors RLIMIT_NOFILE, each less a reserve for
// the runtime, the binary, the UMEM and the sockets (a quarter, at least
// 8,192 mappings and 1,024 descriptors); memory is the least of physical
// memory, the memory cgroup's memory.max and RLIMIT_AS, of which rings
// may take a quarter and registrations three quarters (registering more
// than the machine holds could not be resident). RLIMIT_MEMLOCK is not
// one of them: regions are shared memfd pages the daemon maps, not
// locks, and the UMEM's pinning is the unit's LimitMEMLOCK. One session
// may hold at most a quarter of each total, so no application can take
// the daemon's whole budget from the others. A request beyond either is
// refused with a limit error naming the resource, whichever session asks.

// usage is an amount of each budgeted resource: what a request needs, what
// a session holds, the daemon's totals.
type usage struct {
	maps, fds  int
	ring, regd int64
}

func (u *usage) add(d usage, sign int) {
	u.maps += sign * d.maps
	u.fds += sign * d.fds
	u.ring += int64(sign) * d.ring
	u.regd += int64(sign) * d.regd
}

type budget struct {
	mu   sync.Mutex
	init bool
	held usage // by every session
	max  usage // the daemon's totals
	per  usage // one session's most: a quarter of max
}

var resources budget

// Reserves below the kernel's limits, for what is not a region or a queue
// pair.
const (
	reserveMaps = 8192
	reserveFDs  = 1024
)

func (b *budget) load() {
	if b.init {
		return
	}
	b.init = true
	maps := 65530 // the kernel's default, if /proc says nothing
	if v, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil {
			maps = n
		}
	}
	b.max.maps = max(0, maps-max(reserveMaps, maps/4))
	var rl unix.Rlimit
	fds := 1024
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 1<<30 {
		fds = int(rl.Cur)
	}
	b.max.fds = max(0, fds-max(reserveFDs, fds/4))
	mem := memoryLimit()
	b.max.ring = mem / 4
	b.max.regd = mem - mem/4
	b.per = usage{maps: b.max.maps / 4, fds: b.max.fds / 4, ring: b.max.ring / 4, regd: b.max.regd / 4}
}

// memoryLimit is the memory this process may use: the least of physical
// memory, its cgroup's memory.max and RLIMIT_AS.
func memoryLimit() int64 {
	mem := int64(1) << 62
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fs[1], 10, 64); err == nil {
					mem = kb << 10
				}
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "0::"); ok { // cgroup v2
				if v, err := os.ReadFile("/sys/fs/cgroup" + p + "/memory.max"); err == nil {
					if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil && n > 0 {
						mem = min(mem, n)
					}
				}
			}
		}
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &rl) == nil && rl.Cur != unix.RLIM_INFINITY && rl.Cur < 1<<62 {
		mem = min(mem, int64(rl.Cur))
	}
	return mem
}

// take reserves d for session s (nil: the daemon's own), or says which
// resource is short, and whose.
func (b *budget) take(s *usage, d usage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.load()
	type check struct {
		name, unit, why   string
		need, held, limit int64
	}
	checks := [...]check{
		{"memory mappings", "", "vm.max_map_count less a reserve", int64(d.maps), int64(b.held.maps), int64(b.max.maps)},
		{"descriptors", "", "RLIMIT_NOFILE less a reserve; the unit sets LimitNOFILE", int64(d.fds), int64(b.held.fds), int64(b.max.fds)},
		{"ring memory", " bytes", "a quarter of the memory the process may use", d.ring, b.held.ring, b.max.ring},
		{"registered memory", " bytes", "three quarters of the memory the process may use", d.regd, b.held.regd, b.max.regd},
	}
	for _, c := range checks {
		if c.need > 0 && c.held+c.need > c.limit {
			return proto.Errorf(proto.CodeLimit, "%s: %d more%s over the daemon's budget: it holds %d of the %d it allows itself (%s)",
				c.name, c.need, c.unit, c.held, c.limit, c.why)
		}
	}
	if s != nil {
		for i, sh := range [...]int64{int64(s.maps), int64(s.fds), s.ring, s.regd} {
			c := checks[i]
			limit := [...]int64{int64(b.per.maps), int64(b.per.fds), b.per.ring, b.per.regd}[i]
			if c.need > 0 && sh+c.need > limit {
				return proto.Errorf(proto.CodeLimit, "%s: %d more%s over one session's share: the session holds %d of the %d one session may (a quarter of the daemon's %d)",
					c.name, c.need, c.unit, sh, limit, c.limit)
			}
		}
		s.add(d, 1)
	}
	b.held.add(d, 1)
	return nil
}

// give returns d, which s (nil: the daemon) took.
func (b *budget) give(s *usage, d usage) {
	b.mu.Lock()
	b.held.add(d, -1)
	if s != nil {
		s.add(d, -1)
	}
	b.mu.Unlock()
}

// String is the budget for logs and tests.
func (b *budget) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.load()
	return fmt.Sprintf("%d/%d mappings, %d/%d descriptors, %d/%d ring bytes, %d/%d registered bytes",
		b.held.maps, b.max.maps, b.held.fds, b.max.fds, b.held.ring, b.max.ring, b.held.regd, b.max.regd)
}

// qpCost is what a queue pair of sq slots, a completion queue of its own
// of cq slots (0: it completes into a shared one, which create_cq paid
// for) and tags work request tags takes from the budget while its
// create_qp reply is on its way; qpHandedOver (sharedQPHandedOver) is
// what it gives back once the reply has gone (the rings' memfds and the
// application's doorbell end: the application has its own).
func qpCost(sq, cq, tags int) usage {
	perTag := int64(unsafe.Sizeof(wrTag{}) + unsafe.Sizeof(uint32(0)))
	perSGL := int64(unsafe.Sizeof([proto.MaxSGE][]byte{}) + unsafe.Sizeof(uint16(0)))
	u := usage{maps: 1, fds: 3, ring: ring.Size(sq, proto.WRSize) + int64(tags)*perTag + int64(min(tags, sglSlots))*perSGL}
	if cq > 0 {
		u.maps++
		u.fds++
		u.ring += ring.Size(cq, proto.CQESize) + int64(cq)*int64(unsafe.Sizeof(proto.CQE{}))
	}
	return u
}

var (
	qpHandedOver       = usage{fds: 3}
	sharedQPHandedOver = usage{fds: 2}
)

// cqCost is what a shared completion queue of slots takes (its ring, its
// backlog, its doorbell's two ends and the ring's memfd until the
// create_cq reply has gone); cqHandedOver what it gives back then.
func cqCost(slots int) usage {
	return usage{maps: 1, fds: 3, ring: ring.Size(slots, proto.CQESize) + int64(slots)*int64(unsafe.Sizeof(proto.CQE{}))}
}

var cqHandedOver = usage{fds: 2}
