package h1server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.1 to its Handler on the listeners given to Serve. Its fields are
// set before Serve is called and not changed after.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds reading a request's head, from its first byte (for a
	// connection's first request, from the connection's accept). Zero: no bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no new request for this long.
	// Zero: no bound.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's head (request line included); past it the request
	// is answered 431. Zero: 1 MiB, net/http's default.
	MaxHeaderBytes int
	// Log receives what cannot be answered to a client: a handler's panic, a failed
	// accept. Nil: slog.Default().
	Log *slog.Logger

	unwatched sync.Once // the warning that a listener's connections cannot be watched
	shutdown  atomic.Bool
	mu        sync.Mutex
	closed    chan struct{} // closed by Close
	lns       map[net.Listener]struct{}
	conns     map[*conn]struct{}
}

// Available reports whether this platform has what Serve needs to notice a client that
// leaves while its request runs; where it does not, serve with net/http.
func Available() bool { return hangups.available() }

// maxHeaderBytes is the bound on a request's head, with net/http's 4 KiB of slack for the
// request line and the bufio reader's look-ahead.
func (s *Server) maxHeaderBytes() int64 {
	n := s.MaxHeaderBytes
	if n <= 0 {
		n = 1 << 20
	}
	return int64(n) + 4096
}

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Serve accepts connections on ln and serves each on a goroutine of its own until ln fails
// or the server is shut down or closed; it then returns http.ErrServerClosed. ln is closed
// when Serve returns.
func (s *Server) Serve(ln net.Listener) error {
	if !s.trackListener(ln, true) {
		ln.Close()
		return http.ErrServerClosed
	}
	defer s.trackListener(ln, false)
	defer ln.Close()
	var delay time.Duration // after a temporary accept error, as net/http waits
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return http.ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log().Error("accept failed; retrying", "err", err, "retry_in", delay.String())
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, nc)
		if !s.trackConn(c, true) {
			nc.Close()
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) trackListener(ln net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return track(&s.lns, ln, add, s.shutdown.Load())
}

func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return track(&s.conns, c, add, s.shutdown.Load())
}

// track adds k to the set *m, or removes it; an addition is refused (false) once the
// server is shutting down, so that Shutdown and Close find every listener and connection
// that got in before them. Callers hold mu.
func track[K comparable](m *map[K]struct{}, k K, add, shuttingDown bool) bool {
	if !add {
		delete(*m, k)
		return true
	}
	if shuttingDown {
		return false
	}
	if *m == nil {
		*m = make(map[K]struct{})
	}
	(*m)[k] = struct{}{}
	return true
}

// Shutdown stops accepting, closes the connections that wait for a request, and waits
// until those with a request running have answered it (a response then goes out with
// 'Connection: close') or ctx ends. It returns ctx's error if it ended first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdown.Store(true)
	s.closeListeners()
	wait := time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if s.closeIdle() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			wait = min(2*wait, 500*time.Millisecond)
			timer.Reset(wait)
		}
	}
}

// Close stops accepting and closes every connection at once, requests running or not
// (their contexts are cancelled).
func (s *Server) Close() error {
	s.shutdown.Store(true)
	err := s.closeListeners()
	s.closing() // makes the channel if no connection has yet
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	for c := range s.conns {
		c.nc.Close()
		// A socket closed here is no hangup the watcher sees: the running request is
		// cancelled here, as net/http's Close cancels it (its background read fails), and
		// one that begins after is cancelled at once.
		c.mu.Lock()
		c.hungUp = true
		cancel := c.cancel
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
	return err
}

// closing returns a channel closed by Close.
func (s *Server) closing() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed == nil {
		s.closed = make(chan struct{})
	}
	return s.closed
}

func (s *Server) closeListeners() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for ln := range s.lns {
		if cerr := ln.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// newConnGrace is how long a connection that has sent nothing yet is left open by
// Shutdown: its first request may be on its way (net/http's grace).
const newConnGrace = 5 * time.Second

// closeIdle closes the connections that wait for a request and reports whether none is
// left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().Unix()
	for c := range s.conns {
		switch st := c.state.Load(); {
		case st == stateIdle, st == stateNew && now-c.accepted >= int64(newConnGrace/time.Second):
			c.nc.Close()
		}
	}
	return len(s.conns) == 0
}
