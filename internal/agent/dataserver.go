package agent

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/h1server"
)

// dataServer serves the agent's listener: the gateway's attempts and the control calls.
type dataServer interface {
	Serve(net.Listener) error
	Close() error
}

// newDataServer serves h with the gateway's own HTTP/1.1 server where the platform allows
// it (docs/design.md, "The client's server"): every open attempt through the agent is a
// stream, and a gateway that closes one must cancel it at once, which that server notices
// without a goroutine per connection. Elsewhere net/http's server does the same.
func newDataServer(h http.Handler, log *slog.Logger) dataServer {
	if h1server.Available() {
		return &h1server.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, Log: log}
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}
