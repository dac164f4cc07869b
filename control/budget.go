package control

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
)

// The daemon's own resource budget, enforced before the kernel's: every
// region is one memory mapping and every queue pair two (its rings) plus
// three descriptors (the rings' memfds and the daemon's doorbell end). The
// kernel's limits are per process, and hitting them is not a clean error:
// past vm.max_map_count the Go runtime itself cannot map memory and the
// daemon dies ("fatal error: runtime: cannot allocate memory", issue 22,
// at 65,445 registrations), and past RLIMIT_NOFILE accepts and creates
// start failing everywhere. So the budget is what the limits at start
// allow less a reserve for the runtime, the binary, the UMEM and the
// sockets (a quarter, at least 8,192 mappings and 1,024 descriptors),
// and a request beyond it is refused with a limit error naming the
// resource, whichever session asks.

type budget struct {
	mu             sync.Mutex
	init           bool
	maps, fds      int // held
	maxMaps, maxFD int
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
	b.maxMaps = 65530 // the kernel's default, if /proc says nothing
	if v, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil {
			b.maxMaps = n
		}
	}
	b.maxMaps -= max(reserveMaps, b.maxMaps/4)
	var rl unix.Rlimit
	b.maxFD = 1024
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 1<<30 {
		b.maxFD = int(rl.Cur)
	}
	b.maxFD -= max(reserveFDs, b.maxFD/4)
}

// take reserves maps mappings and fds descriptors, or says which is short.
func (b *budget) take(maps, fds int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.load()
	if b.maps+maps > b.maxMaps {
		return proto.Errorf(proto.CodeLimit, "memory mappings: the daemon holds %d of the %d it allows itself (vm.max_map_count less a reserve)", b.maps, b.maxMaps)
	}
	if b.fds+fds > b.maxFD {
		return proto.Errorf(proto.CodeLimit, "descriptors: the daemon holds %d of the %d it allows itself (RLIMIT_NOFILE less a reserve; the unit sets LimitNOFILE)", b.fds, b.maxFD)
	}
	b.maps += maps
	b.fds += fds
	return nil
}

func (b *budget) give(maps, fds int) {
	b.mu.Lock()
	b.maps -= maps
	b.fds -= fds
	b.mu.Unlock()
}

// String is the budget for logs and tests.
func (b *budget) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.load()
	return fmt.Sprintf("%d/%d mappings, %d/%d descriptors", b.maps, b.maxMaps, b.fds, b.maxFD)
}
