package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// probePool checks every replica of p with GET /health.
func (s *Server) probePool(ctx context.Context, p *pool) {
	for _, tg := range p.targets() {
		ok, reason := s.probe(ctx, tg.url)
		if ctx.Err() != nil {
			return
		}
		p.probeResult(tg.name, ok, reason)
	}
}

func (s *Server) probe(ctx context.Context, url string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Health.ProbeTimeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return false, "probe: " + err.Error()
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false, "probe: " + err.Error()
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Sprintf("probe: status %d", resp.StatusCode)
	}
	return true, ""
}
