// Package proto is the control protocol between metaroced and the
// processes that talk to it: applications through client/, and the
// metaroce tool. It is the cold path (set-up, registration, status), so it
// favours clarity over speed: one JSON object per SOCK_SEQPACKET message,
// with file descriptors (memfds, doorbell sockets) passed beside it as
// SCM_RIGHTS ancillary data.
//
// SOCK_SEQPACKET keeps message boundaries (no framing to get wrong) and
// delivers a message's descriptors with the message itself, and the
// kernel tells the daemon who is calling (SO_PEERCRED). JSON keeps the
// protocol readable with socat and extensible by field: a peer ignores
// fields it does not know, and Version says when that is not enough.
//
// # Messages
//
// Every request carries V (the protocol version, 1), Op and Seq; the
// answer echoes Seq and carries Code ("ok" or one of the Code constants)
// and, unless ok, Error, a sentence for humans. A daemon answers a request
// of another version with CodeVersion and closes nothing: the client
// decides. A message larger than MaxMessage, or one that is not a JSON
// object, is answered with CodeBadRequest; more than MaxFDs descriptors
// with one message are closed unread and the request refused.
//
// The operations and their fields are in docs/api.md.
package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Version is the protocol version this package speaks.
const Version = 1

// MaxMessage bounds one message's JSON: 128 KiB, within the default
// socket buffer (net.core.wmem_default, 208 KiB) that a SOCK_SEQPACKET
// message must fit in. Status replies of a busy daemon fit; a request
// never comes close; larger values are streamed in chunks (SendChunked).
const MaxMessage = 128 << 10

// MaxFDs bounds the descriptors passed with one message (a queue pair's
// rings and doorbells are four).
const MaxFDs = 8

// Code is a response's outcome.
type Code string

// The codes. Each client error maps one to one onto a typed error.
const (
	CodeOK         Code = "ok"
	CodeBadRequest Code = "bad_request" // malformed, or a field out of range
	CodeVersion    Code = "unsupported_version"
	CodeUnknownOp  Code = "unknown_op"
	CodeLimit      Code = "limit"      // a per-session or daemon-wide limit
	CodeNotFound   Code = "not_found"  // no such region, queue pair or engine
	CodeBadRegion  Code = "bad_region" // the memfd is not sealed, too small, or not a memfd
	CodeState      Code = "bad_state"  // e.g. connecting a queue pair twice
	CodeConnect    Code = "connect_failed"
	CodeDenied     Code = "denied" // the caller's credentials do not allow it
	CodeBusy       Code = "busy"
	CodeInternal   Code = "internal"
)

// Header is what every message carries.
type Header struct {
	V     int    `json:"v"`
	Op    string `json:"op,omitempty"`
	Seq   uint64 `json:"seq"`
	Code  Code   `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// Error is a non-ok response as a Go error.
type Error struct {
	Code Code
	Msg  string
	// Reject, for a connect the peer refused, says why.
	Reject *Rejection
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return string(e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Msg)
}

// Errorf makes an *Error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Decode parses one message: the header first (checked), then the whole
// object into body if body is not nil. It never panics on any input
// (fuzzed).
func Decode(b []byte, body any) (Header, error) {
	var h Header
	if len(b) > MaxMessage {
		return h, Errorf(CodeBadRequest, "message of %d bytes, limit %d", len(b), MaxMessage)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return h, Errorf(CodeBadRequest, "not a JSON object")
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, Errorf(CodeBadRequest, "%v", err)
	}
	if h.V != Version {
		return h, Errorf(CodeVersion, "version %d, this side speaks %d", h.V, Version)
	}
	if body != nil {
		if err := json.Unmarshal(b, body); err != nil {
			return h, Errorf(CodeBadRequest, "%v", err)
		}
	}
	return h, nil
}

// Conn is one end of a control connection. It is not safe for concurrent
// use: one request at a time, or one goroutine reading and one writing.
type Conn struct {
	c   *net.UnixConn
	buf []byte
	oob []byte
}

// NewConn wraps a SOCK_SEQPACKET unix connection.
func NewConn(c *net.UnixConn) *Conn {
	return &Conn{c: c, buf: make([]byte, MaxMessage+1), oob: make([]byte, unix.CmsgSpace(4*MaxFDs))}
}

// Dial connects to the daemon's socket at path.
func Dial(path string) (*Conn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}

// Unix returns the underlying connection.
func (c *Conn) Unix() *net.UnixConn { return c.c }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Send writes msg (a struct embedding Header) with fds attached.
func (c *Conn) Send(msg any, fds ...int) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if len(b) > MaxMessage {
		return fmt.Errorf("proto: message of %d bytes, limit %d", len(b), MaxMessage)
	}
	var oob []byte
	if len(fds) > 0 {
		if len(fds) > MaxFDs {
			return fmt.Errorf("proto: %d descriptors, limit %d", len(fds), MaxFDs)
		}
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.c.WriteMsgUnix(b, oob, nil)
	return err
}

// SendRaw writes b as one message, for a stream whose framing its
// operation defines (StreamChunk).
func (c *Conn) SendRaw(b []byte) error {
	if len(b) > MaxMessage {
		return fmt.Errorf("proto: message of %d bytes, limit %d", len(b), MaxMessage)
	}
	_, _, err := c.c.WriteMsgUnix(b, nil, nil)
	return err
}

// Streams of large values (a telemetry snapshot can run to megabytes, and
// a SOCK_SEQPACKET message must fit the socket buffer) go as chunks: each
// message is one marker byte and up to StreamChunk bytes of the value,
// ChunkMore while more of the value follows, ChunkLast on its final
// piece. A JSON message (starting with '{') ends the stream.
const (
	StreamChunk = MaxMessage - 1
	ChunkMore   = 'M'
	ChunkLast   = 'L'
)

// SendChunked writes v's bytes as a chunked value.
func (c *Conn) SendChunked(v []byte) error {
	buf := make([]byte, 0, min(len(v), StreamChunk)+1)
	for {
		n := min(len(v), StreamChunk)
		mark := byte(ChunkMore)
		if n == len(v) {
			mark = ChunkLast
		}
		buf = append(append(buf[:0], mark), v[:n]...)
		if err := c.SendRaw(buf); err != nil {
			return err
		}
		v = v[n:]
		if mark == ChunkLast {
			return nil
		}
	}
}

// ErrTruncated is returned when a message or its descriptors did not fit.
var ErrTruncated = errors.New("proto: message truncated")

// Recv reads one message. The returned bytes are valid until the next
// Recv; the descriptors are the caller's to close (wrapped in *os.File so
// a forgotten one is closed by the finalizer rather than leaked). On
// ErrTruncated any descriptors that did arrive are closed.
func (c *Conn) Recv() ([]byte, []*os.File, error) {
	n, oobn, flags, _, err := c.c.ReadMsgUnix(c.buf, c.oob)
	if err != nil {
		return nil, nil, err
	}
	files, ferr := parseRights(c.oob[:oobn])
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n > MaxMessage {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, ErrTruncated
	}
	if ferr != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, ferr
	}
	if n == 0 {
		return nil, nil, errEOF
	}
	return c.buf[:n], files, nil
}

// errEOF: SOCK_SEQPACKET reads 0 bytes when the peer has closed.
var errEOF = fmt.Errorf("proto: peer closed: %w", net.ErrClosed)

// parseRights returns every descriptor passed in oob.
func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("proto: control message: %w", err)
	}
	var files []*os.File
	var bad error
	for i := range msgs {
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			bad = fmt.Errorf("proto: control message: %w", err)
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return files, bad
}

// Cred is the calling process, as the kernel saw it at connect time.
type Cred struct {
	PID      int32
	UID, GID uint32
}

// PeerCred reads SO_PEERCRED.
func PeerCred(c *net.UnixConn) (Cred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var uc *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		uc, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, err
	}
	if serr != nil {
		return Cred{}, serr
	}
	return Cred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}
