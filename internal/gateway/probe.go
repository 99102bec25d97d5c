package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// probePool checks every replica of p with GET /health, all at once, so that a replica
// that does not answer delays no other's probe.
func (s *Server) probePool(ctx context.Context, p *pool) {
	eachTarget(p, func(tg target) {
		ok, reason := s.probe(ctx, tg)
		if ctx.Err() == nil {
			p.probeResult(tg.name, ok, reason)
		}
	})
	if ctx.Err() == nil {
		s.announce(p)
	}
}

// eachTarget runs f for every replica of p concurrently and waits for all.
func eachTarget(p *pool, f func(target)) {
	var wg sync.WaitGroup
	for _, tg := range p.targets() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(tg)
		}()
	}
	wg.Wait()
}

func (s *Server) probe(ctx context.Context, tg target) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, s.config().Health.ProbeTimeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.url+"/health", nil)
	if err != nil {
		return false, "probe: " + err.Error()
	}
	tg.setCredentials(req.Header)
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
