// Package control is metaroced's side of the application interface:
// sessions on the control socket, memory registration, and queue pairs
// whose send and completion queues are shared-memory rings (ring/) that the
// engines serve directly.
//
// # Sessions
//
// Every connection to the control socket (SOCK_SEQPACKET, control/proto)
// is a session: a protection domain that owns memory regions and queue
// pairs. The kernel names the caller (SO_PEERCRED), the socket's mode and
// group say who may connect at all, and config.Limits bound what one
// session may hold. When the socket closes, for any reason including
// SIGKILL, the session is reclaimed: its queue pairs' connections are
// closed, their services withdrawn, its regions removed from every
// engine's tables at once (so no packet can reach them from then on), and
// the mappings unmapped once every connection that might still name them
// has closed.
//
// # Memory
//
// An application registers a range of a memfd it created and sealed
// against shrinking (F_SEAL_SHRINK, checked): the daemon maps the same
// file, so a client cannot truncate it under the daemon and make it fault.
// Each region gets one 32-bit key, used as lkey and rkey, drawn from
// crypto/rand and never handed out again while it is in use or among the
// last QuarantineKeys released, so a stale key names nothing rather than
// someone else's memory. A key is found only in the session's own table
// (transport.Memory per session and engine), so a key of another session
// is as unknown as a forged one.
//
// # Queue pairs and the engines
//
// A queue pair lives on one engine. Its send queue carries work requests
// (proto.WR, 64-byte slots) from the application to the engine; its
// completion queue carries completions (proto.CQE, 32 bytes) back. The
// engine's Driver (EngineDriver) drains the send queues of the queue
// pairs with something to do (hot ones; one idle for a few milliseconds
// goes cold with its send queue armed, and its doorbell brings it back:
// driver.go) in batches on the engine goroutine, resolves lkeys in the session's table (no lock:
// the table belongs to that engine), and posts to the transport, which
// copies from the region into the packet and from the packet into the
// region: the one copy each way. Completions go into the completion
// queue as the transport delivers them; the engine rings the
// application's doorbell only if it asked to be woken (ring's need-wakeup
// protocol). An engine about to sleep arms the hot send queues and sleeps on
// an epoll set of its queue pairs' doorbell ends (one socket pair per
// queue pair, the daemon's end held by the daemon alone: no session can
// touch another's doorbell, or make the engine block on its own; see
// ring's package doc).
//
// A queue pair completes into its own completion queue or into a shared
// one (create_cq, cq.go), which many of the session's queue pairs
// complete into, each entry carrying its queue pair's number. A shared
// CQ belongs to one engine, its only producer, and its queue pairs are
// placed on that engine, so the hot path still takes no lock and makes no
// syscall per completion; its room is shared (the engine takes a request
// only while the CQ can hold every completion its queue pairs owe).
// A work request's local side may be a scatter-gather list (a
// continuation slot after the request's own): each entry is resolved
// like a single buffer, and the transport gathers from (or scatters into)
// the slices, so a list costs no extra copy.
//
// A queue pair's number is the transport service its peer connects to:
// Connect makes the transport connection to (peer, remote QPN); a queue
// pair that has not connected accepts the first connection made to its
// number, and Accept waits for it. A connect request waits for the
// transport's verdict (a channel the driver signals), unless it asked not
// to (nowait): then it is answered once the CONNECT is sent, nothing in
// the daemon waits, and the driver, on the engine goroutine, writes the
// verdict into the queue pair's completion queue as the connection event
// a waiting connect would have reported. Numbers are drawn (random, with
// the engine's tag) or, for a public listener, chosen by the application
// within the same rule, so a CONNECT for one reaches the engine holding
// it.
package control
