package h1server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
)

func shutdownInBackground(ts *testServer) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), failAfter)
		defer cancel()
		done <- ts.Shutdown(ctx)
	}()
	return done
}

// Shutdown closes a kept-alive connection that waits for its next request, without
// waiting for it to time out (the server has no IdleTimeout here), stops accepting
// (Serve returns http.ErrServerClosed) and returns nil once no connection is left.
func TestShutdownClosesIdleConnection(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	c := dialRaw(t, ts.addr)
	c.send(get("/"))
	if resp, _ := c.response("GET"); resp.Close {
		t.Fatal("the connection was not kept alive before Shutdown")
	}
	done := shutdownInBackground(ts)
	c.expectClosed()
	if err := recv(t, done, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := ts.serveResult(t); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
}

// Shutdown lets a running request finish: its response goes out, saying
// 'Connection: close', the connection then closes, and Shutdown returns nil only after.
func TestShutdownWaitsForRunningRequest(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	}))
	c := dialRaw(t, ts.addr)
	c.send(get("/"))
	recv(t, started, "the handler to start")
	done := shutdownInBackground(ts)
	// Serve returns once Shutdown has closed the listeners, after it marked the server
	// shutting down: the response, still to come, knows it.
	if err := ts.serveResult(t); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v while a request was running", err)
	default:
	}
	close(release)
	resp, body := c.response("GET")
	if resp.StatusCode != 200 || body != "finished" {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Error("the response during Shutdown does not say 'Connection: close'")
	}
	c.expectClosed()
	if err := recv(t, done, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// Shutdown gives up when its context ends first, and says so.
func TestShutdownContextEnds(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
	}))
	c := dialRaw(t, ts.addr)
	c.send(get("/"))
	recv(t, started, "the handler to start")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown returned %v, want context.Canceled", err)
	}
}

// Close cuts every connection at once, a running request's too: its client gets no
// answer, and the request's context is cancelled, as net/http's Close makes its
// connections' background reads fail. Serve returns http.ErrServerClosed.
func TestCloseCutsRunningRequests(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	ts := startServer(t, waitForHangup(started, ended))
	c := dialRaw(t, ts.addr)
	c.send(get("/"))
	recv(t, started, "the handler to start")
	if err := ts.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	c.expectClosed()
	if err := recv(t, ended, "the running request's context to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("the request's context ended with %v, want context.Canceled", err)
	}
	if err := ts.serveResult(t); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
}
