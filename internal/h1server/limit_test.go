package h1server

import (
	"context"
	"errors"
	"net"
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

// Past its bound, LimitListener takes no new connection until one closes: with a bound
// of one, the accepted connection holds the only place, its Close gives it back, and the
// connection that waited is accepted then.
func TestLimitListenerBoundsOpenConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitListener(ln, 1).(*limitListener)
	defer l.Close()
	for range 2 { // both connect: the kernel's backlog holds them until they are accepted
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.sem); n != 1 {
		t.Fatalf("after one accept %d places are taken, want 1 (the bound)", n)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Errorf("second accept: %v", err)
		}
		accepted <- c
	}()
	first.Close()
	second := recv(t, accepted, "the waiting connection to be accepted once the first closed")
	if n := len(l.sem); n != 1 {
		t.Errorf("after the first closed and the second was accepted %d places are taken, want 1", n)
	}
	second.Close()
	if n := len(l.sem); n != 0 {
		t.Errorf("with every connection closed %d places are taken, want 0", n)
	}
}
