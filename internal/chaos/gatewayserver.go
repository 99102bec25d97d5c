package chaos

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/h1server"
)

// gatewayServer serves an in-process gateway's handler as `fencegate serve` serves a
// plaintext listener: with the gateway's own HTTP/1.1 server, so that a run checks the
// server clients meet, with every accepted connection's send buffer kept small
// (smallSendBuffers).
type gatewayServer struct {
	url string
	srv *h1server.Server
}

func serveGateway(ln net.Listener, h http.Handler) *gatewayServer {
	g := &gatewayServer{url: "http://" + ln.Addr().String(), srv: &h1server.Server{Handler: h}}
	go g.srv.Serve(smallSendBuffers{ln})
	return g
}

// closeWithin closes every connection of the gateway's server, waits for its handlers to
// return, and reports whether they all did within d. A handler that never returns is left
// behind.
func (g *gatewayServer) closeWithin(d time.Duration) bool {
	g.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return g.srv.Shutdown(ctx) == nil
}
