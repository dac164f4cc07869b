package control

import (
	"context"

	"github.com/metaroce/metaroce/transport"
)

// OwnedConns returns, for each engine in the order NewServer was given
// them, the local ids of the connections that uid's sessions made. The
// daemon scopes what an unprivileged caller sees (the watch stream) to
// these: a connection's id and peer are what a forged RESET needs, so one
// user must not learn another's. The sessions' connection lists belong to
// their engines' goroutines, so they are read inside each engine's Do.
func (s *Server) OwnedConns(ctx context.Context, uid uint32) ([]map[uint32]bool, error) {
	s.mu.Lock()
	var mine []*session
	for _, ss := range s.sessions {
		if ss.cred.UID == uid {
			mine = append(mine, ss)
		}
	}
	s.mu.Unlock()
	out := make([]map[uint32]bool, len(s.engines))
	for i, e := range s.engines {
		ids := map[uint32]bool{}
		if err := e.E.Do(ctx, func(transport.Time) {
			for _, ss := range mine {
				for _, c := range ss.conns[e] {
					ids[c.LocalID()] = true
				}
			}
		}); err != nil {
			return nil, err
		}
		out[i] = ids
	}
	return out, nil
}
