// Package floorproxy is a measuring instrument: the least a Go proxy built of the
// gateway's own server and engine client costs, served by `fencegate bench --floor-proxy`
// (docs/performance.md). It is never a gateway.
package floorproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/h1server"
	"github.com/fencegate/fencegate/internal/upstream"
)

// floorMaxBody bounds a request body the floor proxy reads, as the gateway's default
// limits.max_body_bytes does.
const floorMaxBody = 32 << 20

// floorSkip are the request fields the floor proxy does not pass on: the framing and
// hop-by-hop fields the engine client writes itself.
var floorSkip = map[string]bool{
	"Connection": true, "Content-Length": true, "Expect": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// Serve serves, on ln, the least a Go proxy built of the gateway's own parts
// does, until ctx ends: the gateway's HTTP/1.1 server on the client's side, its engine
// client (pooled kept-alive connections, the response read in the handler's goroutine)
// on the engine's, and in between nothing but a copy — no parse of the request, no event
// scan, no journal, no failover, a flush after every read of the engine. Measured beside
// nginx and the gateway (docs/performance.md) it says what of the gateway's cost is the
// Go runtime and the two sockets, which no gateway logic can take off, and what is the
// gateway's own work. It is a measuring instrument, never a gateway: it answers a broken
// engine with a cut connection and has no limits beyond the body's size.
func Serve(ctx context.Context, ln net.Listener, upstreamURL *url.URL, log io.Writer) error {
	if upstreamURL.Scheme != "http" || upstreamURL.Host == "" {
		return fmt.Errorf("floor proxy: upstream %q is not an http URL", upstreamURL)
	}
	client, err := upstream.New(upstream.Options{})
	if err != nil {
		return fmt.Errorf("floor proxy: %w", err)
	}
	defer client.CloseIdle()
	fp := &floorProxy{client: client, base: upstreamURL.Scheme + "://" + upstreamURL.Host}
	srv := &h1server.Server{Handler: fp, ReadHeaderTimeout: 10 * time.Second}
	return bench.ServeUntil(ctx, srv, ln, "floor proxy", upstreamURL, log)
}

type floorProxy struct {
	client *upstream.Client
	base   string
}

func (p *floorProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := upstream.ReadAll(http.MaxBytesReader(w, r.Body, floorMaxBody), r.ContentLength, floorMaxBody)
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := p.client.Do(r.Context(), &upstream.Request{
		Method: r.Method, Base: p.base, Path: r.URL.RequestURI(),
		Pass: r.Header, Skip: floorSkip, Body: body,
	})
	if err != nil {
		http.Error(w, "the engine: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Close()
	h := w.Header()
	for _, f := range resp.Header {
		switch k := textproto.CanonicalMIMEHeaderKey(f.Name); k {
		case "Connection", "Content-Length", "Keep-Alive", "Transfer-Encoding":
		default:
			h[k] = append(h[k], f.Value)
		}
	}
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.Status)
	rc := http.NewResponseController(w)
	for {
		b, err := resp.Next()
		if len(b) > 0 {
			if _, werr := w.Write(b); werr != nil {
				return
			}
			if !resp.Ended() {
				if rc.Flush() != nil {
					return
				}
			}
		}
		switch {
		case err == io.EOF:
			return
		case err != nil:
			panic(http.ErrAbortHandler) // cut, so the client sees the answer is not whole
		}
	}
}
