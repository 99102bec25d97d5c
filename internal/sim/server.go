package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Causes given to the listening period's context when it ends, so a handler
// can tell "the replica died" from "the client went away".
var (
	errCrashed = errors.New("sim: replica crashed")
	errClosed  = errors.New("sim: replica closed")
)

// Server is one running simulated replica. Its address is fixed at Start
// and kept across Crash and Restart, so a pool's configuration stays valid
// while the replica is down.
type Server struct {
	cfg        Config
	listenAddr string // host:port to listen on again after a crash
	url        string
	started    time.Time
	sched      *scheduler
	cache      *prefixCache
	metrics    *metrics
	book       recordBook
	responses  responseStore // the Responses API's stored responses
	tools      *toolServers  // the tool servers of engine-run tools (nil: none)
	handler    http.Handler

	faultMu   sync.Mutex
	armed     faultPlan // applied to the next armedLeft requests
	armedLeft int

	generations atomic.Int64 // generation requests that reached the engine, for DivergeFirst

	// kvMu guards kvPub, the KV event publisher of the current process (nil while down or
	// when none is configured), and the endpoints its first process bound, which a
	// restart binds again.
	kvMu                     sync.Mutex
	kvPub                    *kvPublisher
	kvEndpoint, kvReplayAddr string

	mu        sync.Mutex
	life      *life // nil while down
	closed    bool
	epoch     int           // counts crashes, so a stale restart timer does nothing
	upChanged chan struct{} // closed and cleared when the replica goes up or down
	closeCh   chan struct{} // closed by Close
	wg        sync.WaitGroup
}

// life is one listening period, from Start or Restart to Crash or Close.
type life struct {
	ctx    context.Context // parent of every request context of this period
	cancel context.CancelCauseFunc
	ln     net.Listener
	http   *http.Server
	conns  *connSet
	ended  atomic.Bool // set first thing when the period ends
}

// lifeKey finds a request's listening period in its context.
type lifeKey struct{}

// replicaDown reports whether the listening period that accepted the
// request of ctx has ended. It is true from the first instant of a crash,
// before the request's context is cancelled, so a handler whose write fails
// in that instant knows it was the replica, not the client, that went away.
func replicaDown(ctx context.Context) bool {
	l, _ := ctx.Value(lifeKey{}).(*life)
	return l != nil && l.ended.Load()
}

// Start listens on cfg.Addr and serves in background goroutines until Close.
func Start(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sched := newScheduler(cfg.MaxRunning, cfg.MaxWaiting)
	s := &Server{
		cfg:     cfg,
		started: time.Now(),
		sched:   sched,
		cache:   newPrefixCache(cfg.blockSize(), cfg.numGPUBlocks()),
		metrics: newMetrics(cfg, sched),
		closeCh: make(chan struct{}),
	}
	if on, _ := cfg.KVEvents.publishing(); on {
		s.kvEndpoint, s.kvReplayAddr = cfg.KVEvents.Endpoint, cfg.KVEvents.ReplayEndpoint
		s.cache.publish = s.publishKV
	}
	if s.tools, err = connectToolServers(cfg.ToolServers); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("sim: Config.Addr %q: %w", cfg.Addr, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.listenLocked(cfg.Addr); err != nil {
		return nil, err
	}
	bound := s.life.ln.Addr().(*net.TCPAddr)
	port := fmt.Sprint(bound.Port)
	s.listenAddr = net.JoinHostPort(host, port)
	urlHost := bound.IP.String()
	if bound.IP.IsUnspecified() {
		urlHost = "127.0.0.1"
	}
	s.url = "http://" + net.JoinHostPort(urlHost, port)
	return s, nil
}

// listenLocked starts a new listening period on addr; the caller holds s.mu.
func (s *Server) listenLocked(addr string) error {
	if err := s.startKVLocked(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.stopKVLocked()
		return fmt.Errorf("sim: listen on %s: %w", addr, err)
	}
	l := &life{ln: ln, conns: newConnSet()}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.ctx = context.WithValue(l.ctx, lifeKey{}, l)
	srv := &http.Server{
		Handler:           s.handler,
		BaseContext:       func(net.Listener) context.Context { return l.ctx },
		ReadHeaderTimeout: time.Minute,
	}
	l.http = srv
	s.life = l
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(&trackingListener{Listener: ln, set: l.conns}) // ends when ln is closed
	}()
	s.notifyUpLocked()
	return nil
}

// endLifeLocked ends the current listening period: the listener is closed
// so new connections are refused, every open connection is reset, and only
// then are request contexts cancelled with cause. In that order a handler
// woken by the cancel finds its connection already dead and cannot end its
// response cleanly. The caller holds s.mu.
func (s *Server) endLifeLocked(cause error) {
	s.stopKVLocked() // the engine's process, and its publisher, are gone
	l := s.life
	s.life = nil
	l.ended.Store(true)
	_ = l.ln.Close() // Serve returns; its error is the expected "use of closed connection"
	l.conns.resetAll()
	l.cancel(cause)
	_ = l.http.Close() // drops net/http's bookkeeping; the connections are already gone
	s.notifyUpLocked()
}

func (s *Server) notifyUpLocked() {
	if s.upChanged != nil {
		close(s.upChanged)
		s.upChanged = nil
	}
}

// URL returns "http://127.0.0.1:PORT", the same across Crash and Restart.
func (s *Server) URL() string { return s.url }

// Name returns the replica's name, the salt of its output text.
func (s *Server) Name() string { return s.cfg.Name }

// Crash kills the whole replica at once: the listener is closed (new
// connections are refused), every open connection is reset, in-flight
// generations stop and their records end as "crashed", and the prefix cache
// is emptied, and so is the Responses API's store, which lives in the
// engine's process. With Config.RestartAfter the replica listens again after that
// delay; otherwise it stays down until Restart. Crashing a replica that is
// down does nothing.
func (s *Server) Crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life == nil {
		return
	}
	// Records first: whoever sees the connection die must find them ended.
	s.book.endAll(OutcomeCrashed)
	s.endLifeLocked(errCrashed)
	s.cache.reset()
	s.responses.reset() // after the life ended, so no finishing response is kept
	s.epoch++
	if s.cfg.RestartAfter > 0 && !s.closed {
		s.wg.Add(1)
		go s.restartLater(s.epoch)
	}
}

// restartLater restarts the replica after RestartAfter unless it was closed
// or crashed again (a later crash starts its own timer).
func (s *Server) restartLater(epoch int) {
	defer s.wg.Done()
	timer := time.NewTimer(s.cfg.RestartAfter)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-s.closeCh:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.life != nil || s.epoch != epoch {
		return
	}
	_ = s.listenLocked(s.listenAddr) // the port was ours a moment ago; on failure the replica stays down until Restart
}

// Restart listens again on the same address after a crash. Restarting a
// replica that is up does nothing.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.life != nil {
		return nil
	}
	return s.listenLocked(s.listenAddr)
}

// WaitUp blocks until the replica is listening (at once if it is), for
// tests that crash a replica with RestartAfter set.
func (s *Server) WaitUp(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return errClosed
		}
		if s.life != nil {
			s.mu.Unlock()
			return nil
		}
		if s.upChanged == nil {
			s.upChanged = make(chan struct{})
		}
		changed := s.upChanged
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("sim: waiting for %s to come up: %w", s.cfg.Name, ctx.Err())
		}
	}
}

// Close stops the replica for good, ending in-flight requests as Crash
// does, and returns once all of its goroutines have exited.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closeCh)
		if s.life != nil {
			s.book.endAll(OutcomeCrashed)
			s.endLifeLocked(errClosed)
		}
		s.notifyUpLocked()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// tracked wraps h so that Close waits for running handlers. A request that
// arrives after Close has begun is dropped: its connection is being reset.
func (s *Server) tracked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		defer s.wg.Done()
		h.ServeHTTP(w, r)
	})
}

// Records returns a snapshot of every generation request's record, in
// arrival order.
func (s *Server) Records() []Record { return s.book.snapshot() }

// WaitRecord blocks until some record satisfies match and returns it (the
// oldest such). match is re-evaluated on every change of any record.
func (s *Server) WaitRecord(ctx context.Context, match func(Record) bool) (Record, error) {
	return s.book.wait(ctx, match)
}

// weights is the salt of the text a generation produces: Config.Weights, except for the
// first Config.DivergeFirst generations, which answer as other weights would.
func (s *Server) weights() string {
	if n := s.generations.Add(1); n <= int64(s.cfg.DivergeFirst) {
		return s.cfg.Weights + "\x00diverging"
	}
	return s.cfg.Weights
}

// CachedBlocks is the number of blocks in the replica's prefix cache, for tests that hold
// a subscriber of its KV events to it; no engine reports it.
func (s *Server) CachedBlocks() int { return s.cache.len() }
