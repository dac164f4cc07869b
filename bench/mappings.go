package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// asavie/xdp maps its four rings from the socket but never unmaps them:
// neither Close nor a failing NewSocket does. A mapping holds a reference to
// the socket's file, so the socket outlives its fd: it stays bound to its
// queue (the next bind there fails with EBUSY for as long as the process
// lives) and keeps its UMEM pinned (8 MiB per socket here). The helpers
// below find those mappings in /proc/self/maps by the socket's inode and
// unmap them. They touch only mappings of AF_XDP sockets this package
// opened: by inode after Close, or, after a failed NewSocket, the socket
// mappings that appeared during the call and whose socket no fd refers to.

// sockMapping is one mapping of a socket file.
type sockMapping struct {
	start, end uintptr
	ino        uint64
}

// socketMappings lists the mappings of socket files in this process.
func socketMappings() ([]sockMapping, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/maps: %w", err)
	}
	var out []sockMapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "socket:[") {
			continue
		}
		se := strings.SplitN(f[0], "-", 2)
		ino, err1 := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(f[5], "socket:["), "]"), 10, 64)
		if len(se) != 2 || err1 != nil {
			continue
		}
		start, err2 := strconv.ParseUint(se[0], 16, 64)
		end, err3 := strconv.ParseUint(se[1], 16, 64)
		if err2 != nil || err3 != nil {
			continue
		}
		out = append(out, sockMapping{uintptr(start), uintptr(end), ino})
	}
	return out, sc.Err()
}

func munmap(m sockMapping) error {
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, m.start, m.end-m.start, 0); e != 0 {
		return fmt.Errorf("munmap %#x-%#x (socket:[%d]): %w", m.start, m.end, m.ino, e)
	}
	return nil
}

// unmapSocket unmaps every mapping of the socket with inode ino.
func unmapSocket(ms []sockMapping, ino uint64) error {
	var errs []error
	for _, m := range ms {
		if m.ino == ino {
			errs = append(errs, munmap(m))
		}
	}
	return errors.Join(errs...)
}

// unmapOrphans unmaps the socket mappings in after that were not in before
// and whose socket has no open fd in this process.
func unmapOrphans(before, after []sockMapping) error {
	old := make(map[sockMapping]bool, len(before))
	for _, m := range before {
		old[m] = true
	}
	open, err := openSocketInodes()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range after {
		if !old[m] && !open[m.ino] {
			errs = append(errs, munmap(m))
		}
	}
	return errors.Join(errs...)
}

// openSocketInodes returns the inodes of the sockets this process has fds
// for.
func openSocketInodes() (map[uint64]bool, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/fd: %w", err)
	}
	inos := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		if ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 64); err == nil {
			inos[ino] = true
		}
	}
	return inos, nil
}
