package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/upstream"
)

// Server is the gateway: the HTTP handler plus the background health probes of its pools.
type Server struct {
	cfg     *config.Config
	pools   map[string]*pool
	models  []string
	client  *http.Client
	store   store.Store
	journal *store.Journal
	// gatewayID names this gateway as the owner of the requests it runs.
	gatewayID string
	keys      map[string]apiKey // bearer key → identity
	log       *slog.Logger
	now       func() time.Time
	bufs      sync.Pool
	// ownStore is true when the gateway opened the store and so closes it.
	ownStore bool
	// agents are the links to the agents of replicas in fenced mode, by replica name;
	// epochs numbers every lease this gateway grants.
	agents        map[string]*agentLink
	epochs        *lease.Epochs
	controlClient *http.Client
	metrics       *metrics

	// active are the running requests; draining refuses new ones (see Drain).
	activeMu sync.Mutex
	active   map[*run]struct{}
	draining bool
	idle     *sync.Cond

	stopBackground context.CancelFunc
	background     sync.WaitGroup
}

// Options are the gateway's dependencies that are not configuration.
type Options struct {
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Store, when set, is used instead of opening cfg.Store (the caller closes it).
	Store store.Store
	// Dial, when set, replaces the TCP dialer to replicas and agents (tests run the whole
	// gateway on an in-memory network under a fake clock with it).
	Dial upstream.DialFunc
}

// New builds a gateway from a validated configuration and opens its store.
func New(ctx context.Context, cfg *config.Config, opt Options) (*Server, error) {
	if cfg == nil {
		return nil, fmt.Errorf("gateway: nil config")
	}
	s := &Server{
		cfg:       cfg,
		pools:     make(map[string]*pool),
		client:    upstream.NewClient(cfg.Health.DialTimeout.D(), opt.Dial),
		store:     opt.Store,
		gatewayID: cfg.GatewayID,
		log:       opt.Logger,
		now:       opt.Now,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.bufs.New = func() any { b := make([]byte, readChunk); return &b }
	s.active = make(map[*run]struct{})
	s.idle = sync.NewCond(&s.activeMu)
	for i, m := range cfg.Models {
		p := newPool(m, cfg, s.now())
		for j, r := range m.Replicas {
			key, err := engineKey(m, j, fmt.Sprintf("models[%d].replicas[%d]", i, j))
			if err != nil {
				return nil, fmt.Errorf("gateway: %w", err)
			}
			p.keys[r.Name] = key
		}
		s.pools[m.Name] = p
		s.models = append(s.models, m.Name)
	}
	s.keys = buildKeys(cfg.Auth)
	if err := s.linkAgents(opt.Dial); err != nil {
		return nil, err
	}
	if s.gatewayID == "" {
		s.gatewayID = defaultGatewayID()
	}
	if s.store == nil {
		st, err := store.Open(ctx, cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		s.store = st
		s.ownStore = true
	}
	s.journal = store.NewJournal(s.store, store.JournalOptions{Logger: s.log})
	s.metrics = newMetrics(s)
	return s, nil
}

// ID is the gateway's owner id.
func (s *Server) ID() string { return s.gatewayID }

func defaultGatewayID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	var b [4]byte
	rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// Handler returns the gateway's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.withRequestID(s.auth(s.handleChat)))
	mux.HandleFunc("POST /v1/completions", s.withRequestID(s.auth(s.handleCompletions)))
	mux.HandleFunc("POST /v1/messages", s.withRequestID(s.auth(s.handleMessages)))
	mux.HandleFunc("POST /v1/responses", s.withRequestID(s.auth(s.handleResponses)))
	mux.HandleFunc("POST /v1/embeddings", s.withRequestID(s.auth(s.handleEmbeddings)))
	mux.HandleFunc("GET /v1/models", s.withRequestID(s.auth(s.handleModels)))
	mux.HandleFunc("GET /v1/requests/{id}", s.withRequestID(s.auth(s.handleGetRequest)))
	mux.HandleFunc("POST /admin/replicas/{model}/{replica}", s.withRequestID(s.adminOnly(s.handleReplicaState)))
	mux.HandleFunc("POST /admin/refresh", s.withRequestID(s.adminOnly(s.handleRefresh)))
	mux.HandleFunc("GET /healthz", s.withRequestID(s.handleHealthz))
	mux.HandleFunc("GET /readyz", s.withRequestID(s.handleReadyz))
	mux.HandleFunc("GET /metrics", s.withRequestID(s.metrics.handler().ServeHTTP))
	mux.HandleFunc("/", s.withRequestID(s.handleNotFound))
	return mux
}

// Start begins the background work: active health probes, metrics scrapes, the renewal of this gateway's
// ownership of its running requests, and the sweep of expired journal rows. Close stops it.
func (s *Server) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopBackground = cancel
	var first sync.WaitGroup
	for _, p := range s.pools {
		// One probe and scrape before serving, so that health, fingerprints and load are
		// known from the start.
		first.Add(1)
		go func() {
			defer first.Done()
			s.scrapePool(ctx, p)
			s.probePool(ctx, p)
		}()
		h := s.cfg.Health
		s.goBackground(func() { every(ctx, h.ProbeEvery.D(), func(ctx context.Context) { s.probePool(ctx, p) }) })
		s.goBackground(func() { every(ctx, h.ScrapeEvery.D(), func(ctx context.Context) { s.scrapePool(ctx, p) }) })
	}
	for _, l := range s.agents {
		s.goBackground(func() { every(ctx, s.cfg.Leases.RenewEvery.D(), l.renew) })
	}
	s.goBackground(func() { every(ctx, s.cfg.Idempotency.OwnerLease.D()/3, s.renewOwner) })
	s.goBackground(func() { every(ctx, sweepEvery, s.sweep) })
	first.Wait()
}

func (s *Server) goBackground(f func()) {
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		f()
	}()
}

// Close stops background work and writes what the journal still holds. In-flight requests
// are the HTTP server's to drain first.
func (s *Server) Close() error {
	if s.stopBackground != nil {
		s.stopBackground()
		s.background.Wait()
	}
	s.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.journal.Close(ctx)
	if s.ownStore {
		if cerr := s.store.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("gateway: close: %w", err)
	}
	return nil
}

// linkAgents prepares the lease trackers of replicas in fenced mode. Replica names are
// unique per pool; an agent is keyed by its replica's name, so two pools must not name
// different agents alike.
func (s *Server) linkAgents(dial upstream.DialFunc) error {
	s.agents = make(map[string]*agentLink)
	s.epochs = lease.NewEpochs(lease.SeedFromTime(time.Now()))
	// Renewals and cancels get their own connections: a data stream's slow connection
	// must never delay a heartbeat.
	s.controlClient = upstream.NewClient(s.cfg.Health.DialTimeout.D(), dial)
	secret := ""
	if f := s.cfg.AgentSecretFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("gateway: agent_secret_file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	for _, m := range s.cfg.Models {
		for _, r := range m.Replicas {
			if !r.Agent {
				continue
			}
			if _, dup := s.agents[r.Name]; dup {
				return fmt.Errorf("gateway: replica name %q is used by two agents; give them distinct names", r.Name)
			}
			l, err := s.newAgentLink(s.pools[m.Name], r.Name, r.URL, secret)
			if err != nil {
				return fmt.Errorf("gateway: replica %s: %w", r.Name, err)
			}
			s.agents[r.Name] = l
		}
	}
	return nil
}
