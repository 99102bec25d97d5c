package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/limits"
	"github.com/fencegate/fencegate/internal/request"
	"github.com/fencegate/fencegate/internal/secretfile"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/upstream"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the tracer of the spans of requests and attempts.
const tracerName = "github.com/fencegate/fencegate/internal/gateway"

// Server is the gateway: the HTTP handler plus the background health probes of its pools.
type Server struct {
	// live is what the configuration currently says (models and their pools, keys, policy);
	// a reload swaps it, and a request keeps the one it started with. boot is the
	// configuration the gateway started with, for what only a restart changes.
	live   atomic.Pointer[live]
	boot   *config.Config
	client *http.Client
	// attempts sends the attempts of requests to engines and agents: it never resends a
	// request, and its responses are read in the attempt's reader (docs/design.md §6). The
	// rest (probes, scrapes, the canary, tokenize) use client.
	attempts *upstream.Client
	// store is conn as the store: it answers store.ErrUnavailable until the database is
	// reached, which conn tries in the background when it was not at start.
	store   store.Store
	conn    *store.Deferred
	journal *store.Journal
	// gatewayID names this gateway as the owner of the requests it runs.
	gatewayID string
	log       *slog.Logger
	now       func() time.Time
	// ownStore is true when the gateway opened the store and so closes it.
	ownStore bool
	// epochs numbers every lease this gateway grants; agentSecret's current secret is sent
	// on every request to agents (it is read again when its file changes).
	epochs        *lease.Epochs
	agentSecret   *secretfile.File
	controlClient *http.Client
	metrics       *metrics
	resolver      Resolver
	tracer        trace.Tracer
	// storeKeys caches the API keys kept in the store; limiter counts what keys use.
	storeKeys storeKeys
	limiter   *limits.Limiter
	// adminLoopback: the admin listener (admin_listen) is bound to loopback, so its admin
	// calls need no admin key.
	adminLoopback bool
	// configPath is the file a reload reads (POST /admin/reload, SIGHUP).
	configPath string
	loadConfig func(string) (*config.Config, error)
	reloadMu   sync.Mutex

	// services is what requests see of the gateway.
	services request.Server

	// active are the running requests; draining refuses new ones (see Drain).
	activeMu sync.Mutex
	active   map[*request.Run]struct{}
	draining bool
	idle     *sync.Cond

	stopBackground context.CancelFunc
	backgroundCtx  context.Context
	background     sync.WaitGroup
}

// Options are the gateway's dependencies that are not configuration.
type Options struct {
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Store, when set, is used instead of opening cfg.Store (the caller closes it).
	Store store.Store
	// StoreRetry says how a store that cannot be reached at start is tried again (its
	// backoff; tests set its Wait and Rand). Its Logger and Now default to the gateway's.
	StoreRetry store.DeferredOptions
	// Dial, when set, replaces the TCP dialer to replicas and agents (tests run the whole
	// gateway on an in-memory network under a fake clock with it).
	Dial upstream.DialFunc
	// Resolver, when set, replaces DNS for replicas_from (tests inject one they control).
	Resolver Resolver
	// TracerProvider records the spans of requests and attempts; nil: none are made (the
	// client's trace context still reaches the engines, passed on with its headers).
	TracerProvider trace.TracerProvider
	// ConfigPath is the configuration file, read again by a reload; LoadConfig, when set,
	// reads it (the serve command's reader, which also applies its environment), else
	// config.LoadFile does.
	ConfigPath string
	LoadConfig func(path string) (*config.Config, error)
}

// New builds a gateway from a validated configuration and opens its store.
func New(ctx context.Context, cfg *config.Config, opt Options) (*Server, error) {
	if cfg == nil {
		return nil, fmt.Errorf("gateway: nil config")
	}
	s := &Server{
		boot:       cfg,
		client:     upstream.NewClient(cfg.Health.DialTimeout.D(), opt.Dial),
		store:      opt.Store,
		gatewayID:  cfg.GatewayID,
		log:        opt.Logger,
		now:        opt.Now,
		resolver:   opt.Resolver,
		configPath: opt.ConfigPath,
		loadConfig: opt.LoadConfig,
	}
	attempts, err := upstream.New(upstream.Options{Dial: opt.Dial, DialTimeout: cfg.Health.DialTimeout.D()})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.attempts = attempts
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.resolver == nil {
		s.resolver = net.DefaultResolver
	}
	if opt.TracerProvider != nil {
		s.tracer = opt.TracerProvider.Tracer(tracerName)
	}
	s.services = services{s}
	s.active = make(map[*request.Run]struct{})
	s.idle = sync.NewCond(&s.activeMu)
	s.epochs = lease.NewEpochs(lease.SeedFromTime(time.Now()))
	// Renewals and cancels get their own connections: a data stream's slow connection
	// must never delay a heartbeat.
	s.controlClient = upstream.NewClient(cfg.Health.DialTimeout.D(), opt.Dial)
	if f := cfg.AgentSecretFile; f != "" {
		if s.agentSecret, err = secretfile.Load(f); err != nil {
			return nil, fmt.Errorf("gateway: agent_secret_file: %w", err)
		}
	}
	l, err := s.build(cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.live.Store(l)
	if s.gatewayID == "" {
		s.gatewayID = defaultGatewayID()
	}
	retry := opt.StoreRetry
	if retry.Logger == nil {
		retry.Logger = s.log
	}
	if retry.Now == nil {
		retry.Now = s.now
	}
	if s.conn, s.ownStore, err = openStore(ctx, cfg.Store, opt.Store, retry); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.store = s.conn
	// The stored keys are read before the first request: until they are, the gateway
	// cannot tell every key, nor whether it is open (see auth). A store that is not
	// reachable yet is no reason not to start: its keys are read when it comes.
	if cfg.Auth.UsesStoreKeys() {
		ctxKeys, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = s.RefreshKeys(ctxKeys)
		cancel()
		switch {
		case notConnected(err) && len(cfg.Auth.Keys)+len(cfg.Auth.AdminKeys) == 0:
			s.log.Warn("started without the store: no API key is configured and the store's keys cannot be read, so every API request gets 503 journal_unavailable until the store comes (list keys in the configuration, or set auth.store_keys: false if the store holds none)")
		case notConnected(err):
			s.log.Warn("started without the store: requests with an Idempotency-Key, and keys not in the configuration, get 503 journal_unavailable until it comes")
		case err != nil:
			s.log.Warn("API keys not read from the store; they are read again every auth.store_refresh", "err", err)
		}
	} else if !s.conn.State().Opened {
		s.log.Warn("started without the store: requests with an Idempotency-Key get 503 journal_unavailable until it comes")
	}
	if s.limiter, err = newLimiter(cfg.Limits, s.log); err != nil {
		s.closeOwnStore()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.adminLoopback = config.IsLoopback(cfg.AdminListen)
	s.storeKeys.mu.Lock()
	storedAdmin := s.storeKeys.anyAdmin
	s.storeKeys.mu.Unlock()
	s.log.Info(cfg.AdminAccess(storedAdmin))
	if cfg.AdminListen == "" && !cfg.Metrics.Public {
		s.log.Info("/metrics on the one listener needs an admin key (metrics.public: true serves it to anyone)")
	}
	if cfg.Auth.HasPlaintextKeys() {
		s.log.Warn("the configuration holds API keys in plain text; write them as key_sha256 (the hex SHA-256 of the key), or keep them in the store with fencegate keys")
	}
	s.journal = store.NewJournal(s.store, store.JournalOptions{Logger: s.log})
	s.metrics = newMetrics(s)
	return s, nil
}

func (s *Server) closeOwnStore() {
	if s.ownStore {
		s.conn.Close()
	}
}

// newLimiter builds the per-key limiter limits.backend names.
func newLimiter(c config.Limits, log *slog.Logger) (*limits.Limiter, error) {
	o := limits.Options{Logger: log, FailClosed: c.OnBackendError == config.LimitsFailClosed}
	if c.Backend != config.LimitsLocal {
		r, err := limits.NewRedis(limits.RedisOptions{URL: c.Backend, Prefix: c.KeyPrefix})
		if err != nil {
			return nil, err
		}
		o.Shared = r
	}
	return limits.New(o), nil
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

// Handler returns the gateway's public HTTP handler. With admin_listen set it serves only
// the API (/v1/*) and /healthz, and every other path is unknown; the rest is AdminHandler's.
// Without it, it serves everything but pprof, as one listener (routes.go says who may call
// what).
func (s *Server) Handler() http.Handler {
	if s.boot.AdminListen == "" {
		return s.mux(listenerShared)
	}
	return s.mux(listenerAPI)
}

// AdminHandler returns the admin listener's handler (admin_listen): /metrics, /readyz,
// /healthz, the admin calls and pprof under /debug/pprof/. Its admin calls and pprof need
// an admin key unless admin_listen is a loopback address; /metrics, /readyz (in full) and
// /healthz are open, for scrapers and probes that the network already limits.
func (s *Server) AdminHandler() http.Handler { return s.mux(listenerAdmin) }

// mux serves the routes of one listener, each behind what it asks of its caller; a path no
// route takes is answered 404 (405 for a known path asked with another method).
func (s *Server) mux(on listener) *http.ServeMux {
	mux := http.NewServeMux()
	var known []string
	for _, rt := range s.routes() {
		if !rt.servedOn(on) {
			continue
		}
		h := s.guard(rt.access, on, rt.handler)
		if !rt.bare {
			h = s.withRequestID(h)
		}
		mux.HandleFunc(rt.pattern, h)
		if _, path, ok := strings.Cut(rt.pattern, " "); ok && !strings.Contains(path, "{") {
			known = append(known, path)
		}
	}
	mux.HandleFunc("/", s.withRequestID(s.notFound(known)))
	return mux
}

// Start begins the background work: active health probes, metrics scrapes, agent lease
// renewals, DNS discovery, the renewal of this gateway's ownership of its running requests,
// the sweep of expired journal rows, the reading of the store's API keys (every
// auth.store_refresh, and at once when a store that was not reachable at start comes), and
// the consistency canaries. Each loop works on the pools of the moment, so a reload changes
// what they look at. Close stops it.
func (s *Server) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopBackground, s.backgroundCtx = cancel, ctx
	l := s.current()
	for _, p := range l.pools {
		s.startDiscovery(p, l.cfg)
		p.mu.Lock()
		p.startKVSubscriptions(s)
		p.mu.Unlock()
	}
	// One probe and scrape before serving, so that health, fingerprints and load are known
	// from the start.
	s.eachPool(func(p *pool) {
		s.scrapePool(ctx, p)
		s.probePool(ctx, p)
	})
	h := s.boot.Health
	s.goBackground(func() {
		every(ctx, h.ProbeEvery.D(), func(ctx context.Context) { s.eachPool(func(p *pool) { s.probePool(ctx, p) }) })
	})
	s.goBackground(func() {
		every(ctx, h.ScrapeEvery.D(), func(ctx context.Context) { s.eachPool(func(p *pool) { s.scrapePool(ctx, p) }) })
	})
	s.goBackground(func() { every(ctx, s.boot.Leases.RenewEvery.D(), s.renewLeases) })
	s.goBackground(func() { every(ctx, s.boot.Idempotency.OwnerLease.D()/3, s.renewOwner) })
	s.goBackground(func() { every(ctx, sweepEvery, s.sweep) })
	s.goBackground(func() { every(ctx, s.boot.Auth.StoreRefresh.D(), s.refreshKeys) })
	s.goBackground(func() { s.whenStoreOpens(ctx) })
	// A Kubernetes Secret volume changes the file in place, with no signal.
	s.goBackground(func() { s.agentSecret.Watch(ctx, secretfile.DefaultPoll, "agent secret", s.log, nil) })
	s.startCanaries(ctx)
}

// eachPool runs f on every current pool at once and waits for all.
func (s *Server) eachPool(f func(*pool)) {
	var wg sync.WaitGroup
	for _, p := range s.current().pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(p)
		}()
	}
	wg.Wait()
}

// renewLeases renews the leases on every agent at once (each bounded by renew_every).
func (s *Server) renewLeases(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range s.current().pools {
		for _, l := range p.links() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.renew(ctx)
			}()
		}
	}
	wg.Wait()
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
	s.attempts.CloseIdle()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.journal.Close(ctx)
	s.limiter.Close()
	if s.ownStore {
		if cerr := s.conn.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("gateway: close: %w", err)
	}
	return nil
}
