package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/telemetry"
)

// The live telemetry stream on the control socket:
//
//	{"op":"watch","interval_ms":1000,"count":0,"conns":32,"paths":true}
//
// answers with one telemetry.Snapshot per line, the first at once and then
// one every interval_ms (default 1000, at least 10), each with the top
// conns connections of every engine by bytes (default 32, at most
// telemetry.MaxTopConns) and, with paths, each one's paths. With count > 0
// the stream stops after count snapshots and a final empty response ({})
// ends it; with count 0 it runs until the client closes the connection.
// An error ends it as any response does ({"error":...}). A caller that is
// neither root nor the daemon's user sees every engine's totals but only
// the connections its own sessions made (issue 22: ids and peers are what
// a forged RESET needs).

// WatchParams are the watch op's parameters (fields of Request).
type WatchParams struct {
	IntervalMS int  `json:"interval_ms,omitempty"`
	Count      int  `json:"count,omitempty"`
	Conns      int  `json:"conns,omitempty"`
	Paths      bool `json:"paths,omitempty"`
}

// Bounds of a watch: 10 ms keeps a stream from turning into a busy loop
// over the engines (each snapshot visits every engine goroutine); the
// default of 32 connections fills a terminal.
const (
	minWatchInterval = 10 * time.Millisecond
	defaultWatchConn = 32
	// maxWatchLine bounds one snapshot line a client accepts: 1024
	// connections of 256 paths are about 50 MB of JSON.
	maxWatchLine = 64 << 20
	// snapshotTimeout bounds one snapshot's wait for the engines.
	snapshotTimeout = 500 * time.Millisecond
)

type streamKey struct{}

// withStream gives handle the connection, for ops that answer with a
// stream of values before their response.
func withStream(ctx context.Context, c *proto.Conn) context.Context {
	return context.WithValue(ctx, streamKey{}, c)
}

func (d *Daemon) watch(ctx context.Context, p WatchParams) error {
	conn, _ := ctx.Value(streamKey{}).(*proto.Conn)
	if conn == nil {
		return errors.New("watch: not on a stream")
	}
	every := time.Duration(p.IntervalMS) * time.Millisecond
	if every == 0 {
		every = time.Second
	}
	if every < minWatchInterval {
		return fmt.Errorf("watch: interval_ms must be at least %d", minWatchInterval.Milliseconds())
	}
	opts := telemetry.Options{TopConns: p.Conns, Paths: p.Paths}
	if opts.TopConns == 0 {
		opts.TopConns = defaultWatchConn
	}
	engines := d.telemetryEngines()
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; p.Count == 0 || n < p.Count; n++ {
		if n > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		sctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
		s := telemetry.Take(sctx, engines, opts)
		if cred, ok := ctx.Value(credKey{}).(proto.Cred); ok && !privileged(cred) && d.ctl != nil {
			// An unprivileged caller sees its own connections only (and
			// every engine's totals): ids and peers are what a forged
			// RESET needs.
			owned, err := d.ctl.OwnedConns(sctx, cred.UID)
			if err != nil {
				cancel()
				return err
			}
			scope(s, owned)
		}
		cancel()
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if err := conn.SendChunked(b); err != nil {
			return err // the client went away
		}
	}
	return nil
}

// scope drops from s the connections not in owned (per engine index).
func scope(s *telemetry.Snapshot, owned []map[uint32]bool) {
	for i := range s.Engines {
		e := &s.Engines[i]
		var ids map[uint32]bool
		if i < len(owned) {
			ids = owned[i]
		}
		top := e.Top[:0]
		for _, c := range e.Top {
			if ids[c.ID] {
				top = append(top, c)
			}
		}
		e.Top = top
	}
}

// Watch asks for a stream of snapshots and calls f with each until f
// returns an error, the stream ends (p.Count snapshots) or the connection
// fails. The client cannot be used for anything else afterwards unless the
// stream ended by count.
func (c *Client) Watch(p WatchParams, f func(*telemetry.Snapshot) error) error {
	c.seq++
	if err := c.c.Send(&Request{V: proto.Version, Seq: c.seq, Op: "watch", WatchParams: p}); err != nil {
		return err
	}
	var val []byte // a snapshot in chunks (proto.SendChunked)
	for n := 0; ; {
		msg, files, err := c.c.Recv()
		if err != nil {
			return err
		}
		for _, f := range files {
			f.Close()
		}
		if len(msg) > 0 && (msg[0] == proto.ChunkMore || msg[0] == proto.ChunkLast) {
			if len(val)+len(msg) > maxWatchLine {
				return fmt.Errorf("watch: snapshot over %d bytes", maxWatchLine)
			}
			val = append(val, msg[1:]...)
			if msg[0] == proto.ChunkMore {
				continue
			}
			var s telemetry.Snapshot
			err := json.Unmarshal(val, &s)
			val = val[:0]
			if err != nil {
				return err
			}
			if err := f(&s); err != nil {
				return err
			}
			n++
			continue
		}
		// The response closes the stream.
		var resp Response
		if err := json.Unmarshal(msg, &resp); err != nil {
			return err
		}
		if resp.Error != "" {
			return errors.New(resp.Error)
		}
		return nil
	}
}
