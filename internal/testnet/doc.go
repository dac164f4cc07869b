// Package testnet builds throw-away test hosts out of network namespaces and
// veth pairs, for the tests and the demo.
//
// # What it builds
//
// A Net is a set of named network namespaces (ip netns add) joined by veth
// pairs. On top of that low-level kit (Namespace, Link, Endpoint) there are two
// ready topologies:
//
//   - NewPair / OpenPair: two hosts on one veth pair, one subnet, no router.
//   - NewStar / OpenStar: N hosts, each on its own veth pair to a "switch"
//     namespace that routes between them (IPv4 and IPv6 forwarding on, L4
//     multipath hashing on) and can impair each port: random drop in an
//     nftables forward-hook chain, a tc tbf rate limit, cutting and restoring
//     the link, veth offloads off.
//   - NewLeafSpine / OpenLeafSpine: two leaves with N hosts each and M
//     spines (default 2 and 4), ECMP on the leaves hashing L4 ports,
//     tc tbf on the leaf-spine links, nft counters of what each spine
//     forwards, and a spine cut by blackhole or link down
//     (leafspine.go).
//
// Host i of a star is 10.99.i.2/24 and fd00:99:0:i::2/64 with default routes
// via the switch port, which is .1 / ::1 on the same subnet. The hosts of a
// pair are 10.99.0.1/24, fd00:99::1/64 (A) and .2 / ::2 (B). Addresses repeat
// across Nets, which is harmless: every Net has its own namespaces. IPv6 DAD is
// off (accept_dad=0 and nodad), so addresses are usable at once, and
// keep_addr_on_down=1, so cutting a link does not lose its IPv6 addresses.
//
// Nothing is created in the caller's namespace: both ends of every veth pair
// are created directly inside their target namespaces (ip link add ... netns
// X type veth peer ... netns Y), so interfaces outside the Net are never
// touched.
//
// # Names and teardown
//
// Namespaces are named mrtn-<pid>-<start>-<n><rand>-<label>, where start is
// the creating process's start time (from /proc/self/stat) in base 36, n a
// per-process counter and rand two random hex digits. New registers Close with
// t.Cleanup, which the testing package runs on failure, t.Fatal and panics
// too. Close kills any process still inside the Net's namespaces (other than
// this one), then deletes the namespaces, which destroys the veths in them and
// detaches any XDP program attached to those veths. OpenPair, OpenStar and
// Open are the non-test constructors: the caller owns the returned Close.
//
// What survives a SIGKILL or a test-binary timeout is removed by Sweep, which
// New and Open call once per process: it deletes only namespaces with this
// package's prefix whose creating process (pid and start time) no longer
// exists, so a concurrently running test binary is left alone and nothing
// foreign is touched.
//
// # Entering a namespace: the thread rule
//
// A network namespace belongs to an OS thread, not to a process or a
// goroutine. Namespace.Do runs a function on a fresh goroutine that is locked
// to its OS thread (runtime.LockOSThread), moves that thread into the
// namespace with setns(2), runs the function, and moves the thread back. If
// moving back fails the goroutine exits still locked, so the Go runtime
// terminates the thread instead of returning it to the pool: no other
// goroutine can ever run in a namespace it did not ask for. Rules for the
// function passed to Do:
//
//   - Sockets it opens (net.ListenUDP, an AF_XDP socket, a raw socket) belong
//     to the namespace for good and may be used from any goroutine afterwards.
//     Interface indexes are per namespace: look them up inside Do.
//   - Goroutines it starts do NOT inherit the namespace; they run on other
//     threads. Use Namespace.Go for a long-lived goroutine that must stay
//     inside (it keeps the thread locked for its whole life and the runtime
//     discards the thread when it returns).
//   - It runs on another goroutine, so it must not call t.Fatal or t.FailNow;
//     return an error instead.
//
// Commands run inside with ip netns exec (Namespace.Command), which also
// mounts a sysfs for the namespace, so /sys/class/net shows its interfaces.
//
// # Why commands and not netlink
//
// Everything is done by running ip, tc, nft, sysctl and ethtool rather than
// through netlink. Test set-up is a cold path (tens of milliseconds per host
// is fine), the commands' error messages name the problem ("Cannot find device",
// "File exists") where netlink gives a bare errno, a failing step can be pasted
// into a shell to reproduce it, and nftables has no stable Go binding in our
// dependency set. ip -batch keeps the number of processes down. The only
// syscalls made directly are setns (Do, Go), the ICMP socket of Ping, and
// the leaf-spine fabric's tc program (cilium/ebpf, leafspine_hash.go),
// which makes its leaves hash packet headers as a switch does.
//
// ethtool is needed only for SetOffloads; if it is missing, SetOffloads and
// Config.NoOffloads fail with ErrNoEthtool and say so.
package testnet
