package upstream

import (
	"context"
	"net"
	"net/http"
	"time"
)

// DialFunc opens a connection to a replica.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// NewClient returns the HTTP client used for replicas. It has no overall timeout: a
// generation may legitimately stream for minutes, and silence is judged by the failover
// core's timeouts. Dials are bounded, so a replica that is not listening is found fast.
// dial, when not nil, replaces the TCP dialer (an in-memory network in tests).
func NewClient(dialTimeout time.Duration, dial DialFunc) *http.Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	t := &http.Transport{
		DialContext:         dial,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		// Below the keep-alive timeout of the engines' HTTP servers (uvicorn's 5s in
		// vLLM and SGLang), so that the gateway closes an idle connection before the
		// engine does, rather than racing the engine's close with a new request.
		IdleConnTimeout: 4 * time.Second,
		// SSE must not be compressed (each event is flushed as it comes) and a gzip layer
		// would hide partial reads.
		DisableCompression: true,
		// One stream per connection keeps a reset local to its attempt.
		ForceAttemptHTTP2: false,
		WriteBufferSize:   16 << 10,
		ReadBufferSize:    16 << 10,
	}
	return &http.Client{Transport: t}
}
