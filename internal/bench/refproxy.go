package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// ServeReferenceProxy serves, on ln, the plainest Go reverse proxy in front of upstream
// until ctx ends: net/http's server and httputil.ReverseProxy, flushing every write
// (FlushInterval -1, as a streaming proxy must) over a transport tuned as the gateway's
// (kept-alive connections, no compression), and parsing nothing. Measured beside the
// gateway it is the price of net/http alone (docs/performance.md): what a Go gateway pays
// before it does anything of its own.
func ServeReferenceProxy(ctx context.Context, ln net.Listener, upstream *url.URL, log io.Writer) error {
	if upstream.Scheme != "http" && upstream.Scheme != "https" || upstream.Host == "" {
		return fmt.Errorf("bench: reference proxy: upstream %q is not an http(s) URL", upstream)
	}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     4 * time.Second,
		DisableCompression:  true,
	}
	// Full duplex: net/http's server otherwise discards and closes a request's body when
	// the handler starts its response, while the proxy's transport may still be reading
	// that body — at least its end, after the engine, which had every byte, began to
	// answer. The transport then fails the request write and closes the engine
	// connection under the answer it is relaying: 2–5 % of one-stream requests to
	// `fencegate sim` ended early that way, and Caddy's stream_truncated beside them looks
	// the same (TestReferenceProxyKeepsTheBodyOpenWhileTheAnswerStreams).
	duplex := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // net/http's own writer supports it
		rp.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: duplex, ReadHeaderTimeout: 10 * time.Second}
	return ServeUntil(ctx, srv, ln, "reference proxy", upstream, log)
}

// Server is what ServeUntil runs: net/http's server or the gateway's own.
type Server interface {
	Serve(net.Listener) error
	Close() error
}

// ServeUntil runs a measuring proxy, named name, on ln in front of upstream until ctx
// ends, saying on log where it listens.
func ServeUntil(ctx context.Context, srv Server, ln net.Listener, name string, upstream *url.URL, log io.Writer) error {
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	fmt.Fprintf(log, "%s listening on http://%s, in front of %s\n", name, ln.Addr(), upstream)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
