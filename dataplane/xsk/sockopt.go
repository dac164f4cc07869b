package xsk

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// x/sys/unix has the AF_XDP types and constants but no typed setsockopt or
// getsockopt for them; these pass a pointer and a length, as the kernel
// expects. All are cold-path.

func setsockopt(fd, level, name int, val unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name),
		uintptr(val), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

// getsockopt returns the length the kernel wrote.
func getsockopt(fd, level, name int, val unsafe.Pointer, size uintptr) (uintptr, error) {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name),
		uintptr(val), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return uintptr(l), nil
}

func setsockoptU32(fd, level, name int, v uint32) error {
	return setsockopt(fd, level, name, unsafe.Pointer(&v), unsafe.Sizeof(v))
}

// Hot-path syscalls: no allocation, the errno returned as is (an Errno in
// an error interface does not allocate).

// sendtoKick is sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0): "process the TX
// ring". In copy mode the kernel sends up to the TX budget of frames within
// this call.
func sendtoKick(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// recvfromWake is recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL): "the fill
// ring has frames again", for drivers that set the fill ring's need_wakeup.
func recvfromWake(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// ppoll waits for events on one fd, timeout nil meaning forever.
func ppoll(fd *unix.PollFd, timeout *unix.Timespec) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(fd)), 1,
		uintptr(unsafe.Pointer(timeout)), 0, 0, 0)
	return int(n), e
}
