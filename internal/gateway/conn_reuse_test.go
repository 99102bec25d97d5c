package gateway_test

import (
	"io"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/faultproxy"
)

// Completed streams hand their upstream connection back for reuse: a new connection per
// request would add a TCP handshake to every time to first token.
func TestUpstreamConnectionsAreReused(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 1})
	p, err := faultproxy.Start(strings.TrimPrefix(e.sims[0].URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	g := newEnv(t, envOptions{sims: e.sims, config: func(c *config.Config) { c.Models[0].Replicas[0].URL = p.URL() }})
	for i := 0; i < 20; i++ {
		resp := post(t, g.srv.URL+"/v1/chat/completions", streamBody("reuse", 4))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Probes and scrapes share the client and may run alongside a request: allow them
	// connections of their own. Without reuse this would be 20 or more.
	if n := p.Stats().Accepted; n > 3 {
		t.Fatalf("%d upstream connections for 20 sequential requests", n)
	}
}
