package bench_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/floorproxy"
	"github.com/fencegate/fencegate/internal/sim"
)

// Both measuring proxies forward streams as the engine writes them: a load through either
// gets every token of every answer, a whole answer arrives as the engine sent it, and the
// proxy ends when its context does.
func TestMeasuringProxiesForward(t *testing.T) {
	for _, p := range []struct {
		name  string
		serve func(context.Context, net.Listener, *url.URL, io.Writer) error
	}{
		{"reference", bench.ServeReferenceProxy},
		{"floor", floorproxy.Serve},
	} {
		t.Run(p.name, func(t *testing.T) {
			s := startSim(t, sim.Config{})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(s.URL())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.serve(ctx, ln, u, &discard{}) }()
			proxy := "http://" + ln.Addr().String()
			rep, _ := runJSON(t, "--url", proxy, "--requests", "20", "--concurrency", "4", "--max-tokens", "8")
			if r := onlyRun(t, rep); r.Failed != 0 || r.OutputTokens != 20*8 {
				t.Fatalf("through the %s proxy: %d failed, %d tokens", p.name, r.Failed, r.OutputTokens)
			}
			// The list's permission id is new on every call, as vLLM's is: the answers
			// agree in length and model.
			direct, via := get(t, s.URL()+"/v1/models"), get(t, proxy+"/v1/models")
			if len(via) != len(direct) || !bytes.Contains(via, []byte(`"id":"sim-model"`)) {
				t.Fatalf("/v1/models through the %s proxy:\n%s\ndirectly:\n%s", p.name, via, direct)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := p.serve(context.Background(), ln, &url.URL{Scheme: "unix", Path: "/x"}, &discard{}); err == nil {
				t.Fatal("a unix URL was accepted as upstream")
			}
		})
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(b)) {
		t.Fatalf("GET %s: %d, Content-Length %d for %d bytes, %v", url, resp.StatusCode, resp.ContentLength, len(b), err)
	}
	return b
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }
