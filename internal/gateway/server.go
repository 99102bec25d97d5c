package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/upstream"
)

// Server is the gateway: the HTTP handler plus the background health probes of its pools.
type Server struct {
	cfg     *config.Config
	pools   map[string]*pool
	models  []string
	client  *http.Client
	journal *memJournal
	keys    map[string]apiKey // bearer key → identity
	log     *slog.Logger
	now     func() time.Time
	bufs    sync.Pool

	stopProbes context.CancelFunc
	probes     sync.WaitGroup
}

// Options are the gateway's dependencies that are not configuration.
type Options struct {
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// New builds a gateway from a validated configuration.
func New(cfg *config.Config, opt Options) (*Server, error) {
	if cfg == nil {
		return nil, fmt.Errorf("gateway: nil config")
	}
	s := &Server{
		cfg:     cfg,
		pools:   make(map[string]*pool),
		client:  upstream.NewClient(cfg.Health.DialTimeout.D()),
		journal: newMemJournal(100_000),
		log:     opt.Logger,
		now:     opt.Now,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.bufs.New = func() any { b := make([]byte, readChunk); return &b }
	for _, m := range cfg.Models {
		s.pools[m.Name] = newPool(m, cfg, s.now())
		s.models = append(s.models, m.Name)
	}
	s.keys = buildKeys(cfg.Auth)
	return s, nil
}

// Handler returns the gateway's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.withRequestID(s.auth(s.handleChat)))
	mux.HandleFunc("POST /v1/completions", s.withRequestID(s.auth(s.handleCompletions)))
	mux.HandleFunc("GET /v1/models", s.withRequestID(s.auth(s.handleModels)))
	mux.HandleFunc("GET /v1/requests/{id}", s.withRequestID(s.auth(s.handleGetRequest)))
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)
	mux.HandleFunc("/", s.withRequestID(s.handleNotFound))
	return mux
}

// StartProbes begins the active health probes; Close stops them.
func (s *Server) StartProbes() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopProbes = cancel
	for _, p := range s.pools {
		s.probes.Add(1)
		go func() {
			defer s.probes.Done()
			s.probeLoop(ctx, p)
		}()
	}
}

// Close stops background work. In-flight requests are the HTTP server's to drain.
func (s *Server) Close() error {
	if s.stopProbes != nil {
		s.stopProbes()
		s.probes.Wait()
	}
	s.client.CloseIdleConnections()
	return nil
}
