package h1server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
)

// A connection accepted through LimitListener is still watched: its client leaving
// cancels the running request (through netutil's LimitListener it would not be, its
// wrap hiding the socket).
func TestLimitListenerConnectionsAreWatched(t *testing.T) {
	skipWithoutWatcher(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	ts := startServerOn(t, LimitListener(ln, 4), waitForHangup(started, ended))
	c := dialRaw(t, ts.addr)
	c.send(get("/"))
	recv(t, started, "the handler to start")
	c.Close()
	if err := recv(t, ended, "the request's context to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("context ended with %v, want context.Canceled", err)
	}
}

// Past its bound, LimitListener leaves a new connection unaccepted until one closes.
func TestLimitListenerBoundsOpenConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan string, 2)
	ts := startServerOn(t, LimitListener(ln, 1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- r.URL.Path
	}))
	first := dialRaw(t, ts.addr)
	first.send(get("/first"))
	if p := recv(t, served, "the first request"); p != "/first" {
		t.Fatalf("served %s", p)
	}
	first.response(http.MethodGet)
	second := dialRaw(t, ts.addr) // connected by the kernel, not accepted
	second.send(get("/second"))
	select {
	case p := <-served:
		t.Fatalf("%s was served while the first connection held the only place", p)
	default:
	}
	first.Close()
	if p := recv(t, served, "the second request once the first connection closed"); p != "/second" {
		t.Fatalf("served %s", p)
	}
	second.response(http.MethodGet)
}
