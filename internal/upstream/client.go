package upstream

import (
	"context"
	"net"
	"net/http"
	"time"
)

// ReadBufferSize is the transport's read buffer per engine connection. A body Read
// returns at most this much, so a reader's own buffer need not be larger.
const ReadBufferSize = 8 << 10

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
		// Every open stream holds both buffers for its whole life, so they are what an idle
		// stream costs (docs/performance.md). A request is written once (bufio writes a
		// larger body straight through); reads are bounded by ReadBufferSize, since the
		// chunked body reader returns what the buffer holds, so 8 KiB still forwards a
		// busy stream in batches of a few dozen events.
		WriteBufferSize: 4 << 10,
		ReadBufferSize:  ReadBufferSize,
	}
	return &http.Client{Transport: t}
}
