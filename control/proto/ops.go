package proto

import (
	"encoding/hex"
	"encoding/json"
)

// The session operations (docs/api.md). Requests and responses are one
// struct each, with every operation's fields optional, so one Decode
// serves every operation and a field added later is ignored by an older
// peer.
const (
	OpHello     = "hello"      // version and limits; the first request of a session
	OpRegister  = "reg_mr"     // register a memfd range (fd attached)
	OpDeregMR   = "dereg_mr"   // deregister a region by key
	OpCreateQP  = "create_qp"  // make a queue pair; rings and doorbells come back attached
	OpConnect   = "connect"    // connect a queue pair to a remote queue pair
	OpAccept    = "accept"     // wait for a remote queue pair to connect to this one
	OpDestroyQP = "destroy_qp" // close a queue pair's connection and free it
	OpQueryQP   = "query_qp"   // a queue pair's state, peer and, once closed, why
	// Shared completion queues: one ring many queue pairs complete into
	// (create_qp's CQ), bound to one engine.
	OpCreateCQ  = "create_cq"  // make a completion queue; its ring and doorbell come back attached
	OpDestroyCQ = "destroy_cq" // free a completion queue no queue pair completes into
	// Listeners: a service that takes many connections, each a request
	// the application accepts onto a fresh queue pair or rejects.
	OpListen        = "listen"         // make a listener: its service number
	OpGetRequest    = "get_request"    // wait for a connection request on a listener
	OpAcceptRequest = "accept_request" // bind a request's connection to an idle queue pair
	OpRejectRequest = "reject_request" // close a request's connection
	OpUnlisten      = "unlisten"       // close a listener and the requests it holds
	OpSession       = "session"        // what this session holds (regions, queue pairs)
	OpSessions      = "sessions"       // daemon-wide session counts (for tests and status)
)

// Access rights of a region (§10.2); the same bits as transport.Access.
const (
	AccessLocalWrite  = 1
	AccessRemoteRead  = 2
	AccessRemoteWrite = 4
	accessAll         = AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite
)

// ValidAccess reports whether a is a combination of the access bits.
func ValidAccess(a uint8) bool { return a&^accessAll == 0 }

// Request is any request.
type Request struct {
	Header
	// reg_mr: the range [Offset, Offset+Length) of the attached memfd,
	// which the application addresses as Addr (its own virtual address
	// of the first byte, or any base it chooses; remote peers use the
	// same addresses), with Access rights.
	Offset uint64 `json:"offset,omitempty"`
	Length uint64 `json:"length,omitempty"`
	Addr   uint64 `json:"addr,omitempty"`
	Access uint8  `json:"access,omitempty"`
	// dereg_mr.
	Key uint32 `json:"key,omitempty"`
	// create_qp: ring sizes in slots (powers of two; 0: defaults) and the
	// engine (interface queue) to serve it (default 0).
	SQSlots int `json:"sq_slots,omitempty"`
	CQSlots int `json:"cq_slots,omitempty"`
	Engine  int `json:"engine,omitempty"`
	// create_qp: deliver the queue pair's connection events into its
	// completion queue (CQEvent entries). A daemon that predates them
	// ignores the field and sends none.
	Events bool `json:"events,omitempty"`
	// create_qp: the queue pair's connection, whether it connects or is
	// accepted (on its number, or from a listener by accept_request),
	// retries a SEND the peer refuses for want of a posted receive (RNR)
	// for as long as the peer answers, backing off to one resend a
	// millisecond, instead of failing after the daemon's
	// transport.rnr_retries (docs/spec.md §6.3; InfiniBand's rnr_retry
	// 7). A daemon that predates it ignores the field and keeps the limit.
	RNRRetryForever bool `json:"rnr_retry_forever,omitempty"`
	// create_qp: the shared completion queue (create_cq's CQ) the queue
	// pair completes into, instead of a completion queue of its own (0);
	// its engine must be the CQ's. destroy_cq: the CQ. create_cq takes
	// CQSlots and Engine.
	CQ uint32 `json:"cq,omitempty"`
	// listen: how many connection requests may wait (0: 64, at most
	// MaxBacklog), and the Service to listen at (0: one drawn; a chosen
	// one must be Public, in 1..MaxService, carry the engine's tag and be
	// free: docs/api.md, Listeners); get_request, accept_request,
	// reject_request, unlisten: the listener's Service; accept_request,
	// reject_request: the Request (from get_request); accept_request: the
	// idle queue pair in QPN.
	Backlog int    `json:"backlog,omitempty"`
	Service uint32 `json:"service,omitempty"`
	Request uint64 `json:"request,omitempty"`
	// connect, accept, destroy_qp: the local queue pair; connect: the
	// peer's address and queue pair number; connect and accept: how long
	// to wait, in milliseconds (0: the transport's connect timeout).
	QPN       uint32 `json:"qpn,omitempty"`
	Peer      string `json:"peer,omitempty"`
	RemoteQPN uint32 `json:"remote_qpn,omitempty"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
	// connect: answer as soon as the CONNECT is sent instead of when the
	// connection is up or has failed; the outcome is the queue pair's
	// connection event (EventConnected, or EventFailed or
	// EventRetryExceeded as a waiting connect reports when it gives up),
	// so the queue pair must have been made with Events. A daemon that
	// predates it ignores the field and waits.
	NoWait bool `json:"nowait,omitempty"`
	// connect: the remote queue pair's or listener's token (create_qp's
	// or listen's Token on the peer's side, shipped out of band with its
	// number); 0 for a public listener.
	Token uint64 `json:"token,omitempty"`
	// connect, accept_request, reject_request: private data for the peer
	// (at most MaxPrivate bytes; docs/spec.md §7.1).
	Private Hex `json:"private,omitempty"`
	// reject_request: the application's reason, carried in the REJECT.
	AppReason uint16 `json:"app_reason,omitempty"`
	// listen: a public listener (token 0): whoever knows the service
	// number may connect, as to a TCP port.
	Public bool `json:"public,omitempty"`
}

// MaxPrivate bounds the private data of connect, accept_request and
// reject_request: what a CONNECT, ACCEPT or REJECT carries (§7.1).
const MaxPrivate = 64

// Hex is bytes that travel as a hex string in JSON (a C client writes and
// reads it without a base64 codec).
type Hex []byte

func (h Hex) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(h)) }

func (h *Hex) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := hex.DecodeString(s)
	*h = v
	return err
}

// Rejection is why a connect was refused (docs/spec.md §7.5): the REJECT's
// reason ("no_service", "limit", "application" ...), and for
// "application" the listening application's reason and private data.
type Rejection struct {
	Reason    string `json:"reason"`
	AppReason uint16 `json:"app_reason,omitempty"`
	Private   Hex    `json:"private,omitempty"`
}

// Response is any response.
type Response struct {
	Header
	// hello: the daemon's limits for this session.
	MaxRegions     int    `json:"max_regions,omitempty"`
	MaxRegionBytes int64  `json:"max_region_bytes,omitempty"`
	MaxQPs         int    `json:"max_qps,omitempty"`
	SessionID      uint64 `json:"session_id,omitempty"`
	// MaxSGE is the most scatter-gather entries a work request may
	// carry (WRSGL; 0 from a daemon that predates them: none).
	MaxSGE int `json:"max_sge,omitempty"`
	// EngineCPUs are the CPUs the daemon's engines are pinned to (none
	// when they are not pinned): where an application's polling would
	// take the CPU its engine needs (client.Client.AvoidEngineCPUs).
	EngineCPUs []int `json:"engine_cpus,omitempty"`
	// create_cq: the completion queue's number, for create_qp's CQ (its
	// ring and the application's end of its doorbell are attached).
	CQ uint32 `json:"cq,omitempty"`
	// reg_mr: the region's key (lkey and rkey alike).
	Key uint32 `json:"key,omitempty"`
	// create_qp: the queue pair's number (the service remote peers
	// connect to), the engine's local address, the largest payload per
	// packet, and the ring geometry (rings and doorbells attached in the
	// order SQ memfd, CQ memfd, SQ doorbell, CQ doorbell).
	QPN        uint32 `json:"qpn,omitempty"`
	Local      string `json:"local,omitempty"`
	MaxPayload int    `json:"max_payload,omitempty"`
	// accept: who connected; query_qp: the peer, if any.
	Peer string `json:"peer,omitempty"`
	// create_qp, listen: the token a peer's connect must carry (0 for a
	// public listener); ship it with the number, like an rkey.
	Token uint64 `json:"token,omitempty"`
	// connect: the ACCEPT's private data; get_request: the CONNECT's.
	Private Hex `json:"private,omitempty"`
	// A connect_failed error of a refused connect: why.
	Rejection *Rejection `json:"rejection,omitempty"`
	// query_qp: the queue pair's state (QPState*) and, once closed, why
	// (a completion status name: "flushed" for an orderly close by
	// either side, "reset", "retry_exceeded", "rejected" ...).
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// get_request: the request's id (and its peer in Peer); listen: the
	// service, and the engine's address in Local.
	Request uint64 `json:"request,omitempty"`
	Service uint32 `json:"service,omitempty"`
	// session, sessions: counts.
	Sessions int   `json:"sessions,omitempty"`
	Regions  int   `json:"regions,omitempty"`
	Bytes    int64 `json:"bytes,omitempty"`
	QPs      int   `json:"qps,omitempty"`
}

// Queue pair states, as query_qp names them.
const (
	QPStateIdle       = "idle"       // accepting a connection to its number
	QPStateConnecting = "connecting" // connect sent, no answer yet
	QPStateConnected  = "connected"
	QPStateClosed     = "closed" // closed or failed: only destroy_qp is left
)

// StatusName names a completion status for query_qp's reason.
func StatusName(s CQStatus) string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

var statusNames = [...]string{"ok", "remote_access", "remote_invalid", "rnr_retry_exceeded", "retry_exceeded",
	"local_length", "flushed", "reset", "rejected", "local_protection", "bad_wr", "not_connected"}

// MaxBacklog bounds a listener's waiting connection requests.
const MaxBacklog = 4096

// MaxService is the largest queue pair or service number the daemon hands
// out (2^24-1), and so the largest a listen may ask for: the numbers
// above are the daemon's own services (the compliance suite's).
const MaxService = 1<<24 - 1

// MinDrawn is the smallest number the daemon draws for a queue pair or a
// listener: the numbers below it, the port numbers, are left to listeners
// at a chosen service, so that one of those is never found taken by a
// draw (only by another chosen listener).
const MinDrawn = 1 << 16
