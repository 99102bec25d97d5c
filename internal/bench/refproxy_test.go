package bench_test

import (
	"context"
	"net"
	"net/url"
	"testing"

	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/sim"
)

// The reference proxy forwards streams as the engine writes them: a load through it gets
// every token of every answer, and ends when its context does.
func TestReferenceProxyForwardsStreams(t *testing.T) {
	s := startSim(t, sim.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(s.URL())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bench.ServeReferenceProxy(ctx, ln, u, &discard{}) }()
	rep, _ := runJSON(t, "--url", "http://"+ln.Addr().String(), "--requests", "20", "--concurrency", "4", "--max-tokens", "8")
	if r := onlyRun(t, rep); r.Failed != 0 || r.OutputTokens != 20*8 {
		t.Fatalf("through the reference proxy: %d failed, %d tokens", r.Failed, r.OutputTokens)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := bench.ServeReferenceProxy(context.Background(), ln, &url.URL{Scheme: "unix", Path: "/x"}, &discard{}); err == nil {
		t.Fatal("a unix URL was accepted as upstream")
	}
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }
