package gateway

// RoutePatterns lists the pattern of every endpoint the gateway serves, on any listener,
// for the table test of who may call what.
func (s *Server) RoutePatterns() []string {
	var out []string
	for _, rt := range s.routes() {
		out = append(out, rt.pattern)
	}
	return out
}
