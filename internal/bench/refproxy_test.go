package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

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

// The reference proxy's client may still be reading the request body it forwards when the
// engine's answer begins: the engine answers once it has the body's bytes, the client's
// last read of the body (the one that finds its end) can come after. net/http's server by
// default discards and closes a request's body when its handler starts the response, which
// cut that read, and with it the engine connection and the stream — 2–5 % of one-stream
// requests through the proxy to `fencegate sim` ended early. Here the engine starts its
// answer before the body's last bytes are sent: the proxy must keep the body open and
// forward them, and the answer must end whole.
func TestReferenceProxyKeepsTheBodyOpenWhileTheAnswerStreams(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		b, err := io.ReadAll(r.Body) // the body's end comes after the client saw "first"
		fmt.Fprintf(w, "data: %q %v\n\ndata: [DONE]\n\n", b, err)
	}))
	t.Cleanup(engine.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(engine.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bench.ServeReferenceProxy(ctx, ln, u, &discard{}) }()
	t.Cleanup(func() { cancel(); <-done })

	// A proxy that closes the body would leave the client waiting for the answer and the
	// answer waiting for the body: the bound ends the wait (and the body's writer with it).
	bound, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	body, send := io.Pipe()
	context.AfterFunc(bound, func() { send.CloseWithError(bound.Err()) })
	req, _ := http.NewRequestWithContext(bound, http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", body)
	req.ContentLength = int64(len("head+tail"))
	go send.Write([]byte("head+"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	send.Write([]byte("tail"))
	send.Close()
	rest, err := io.ReadAll(r)
	if want := "\ndata: \"head+tail\" <nil>\n\ndata: [DONE]\n\n"; err != nil || string(rest) != want {
		t.Fatalf("the rest of the answer %q, %v; want %q", rest, err, want)
	}
}
