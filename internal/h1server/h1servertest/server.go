// Package h1servertest starts an h1server.Server on a loopback port for tests, in the
// shape of an httptest.Server, so that tests written against httptest run through the
// server the gateway's plaintext listeners use.
package h1servertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/fencegate/fencegate/internal/h1server"
)

// NewServer serves h on 127.0.0.1 with h1server. The returned httptest.Server has its URL
// and Listener set; its Close shuts the h1server down and waits for its handlers.
// Its Client, TLS and connection-state fields are not set.
func NewServer(h http.Handler) *httptest.Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("h1servertest: listen: " + err.Error())
	}
	return Serve(ln, h)
}

// Serve is NewServer on a listener of the caller's (one that records what is written, say).
func Serve(ln net.Listener, h http.Handler) *httptest.Server {
	srv := &h1server.Server{Handler: h}
	closing := &closingListener{Listener: ln, srv: srv}
	ts := &httptest.Server{URL: "http://" + ln.Addr().String(), Listener: closing, Config: &http.Server{Handler: h}}
	go srv.Serve(ln)
	return ts
}

// closingListener shuts the whole server down when httptest.Server.Close closes its
// listener, and, as httptest.Server.Close does, waits for the running handlers to return
// (for at most closeWait; the connections still open are then cut).
type closingListener struct {
	net.Listener
	srv *h1server.Server
}

const closeWait = 10 * time.Second

func (l *closingListener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		return l.srv.Close()
	}
	return nil
}
