package upstream

import (
	"net"
	"net/http"
	"time"
)

// NewClient returns the HTTP client used for replicas. It has no overall timeout: a
// generation may legitimately stream for minutes, and silence is judged by the failover
// core's timeouts. Dials are bounded, so a replica that is not listening is found fast.
func NewClient(dialTimeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
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
