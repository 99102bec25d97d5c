package gateway

import "context"

// StoreOpened is closed once the gateway's store is open.
func (s *Server) StoreOpened() <-chan struct{} { return s.conn.Ready() }

// FlushJournal writes what the journal holds now.
func (s *Server) FlushJournal(ctx context.Context) error { return s.journal.Flush(ctx) }

// RoutePatterns lists the pattern of every endpoint the gateway serves, on any listener,
// for the table test of who may call what.
func (s *Server) RoutePatterns() []string {
	var out []string
	for _, rt := range s.routes() {
		out = append(out, rt.pattern)
	}
	return out
}
