package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/secretfile"
	"github.com/fencegate/fencegate/internal/upstream"
)

// Agent is one running agent. Start it with Start; stop it with Close.
type Agent struct {
	// content is the model directory's digest (ContentDigest), "" without --model-dir.
	content string
	cfg     Config
	engine  *url.URL
	log     *slog.Logger
	url     string

	ln    net.Listener
	srv   dataServer
	proxy *httputil.ReverseProxy // every unfenced request
	// secret is what requests must carry (nil: none); metrics are the agent's own, served
	// at PathMetrics and, with metricsSrv, on the metrics listener.
	secret     *secretfile.File
	metrics    *agentMetrics
	metricsLn  net.Listener
	metricsSrv *http.Server
	metricsURL string
	// client carries the scrape, unfenced requests and SGLang aborts. Fenced
	// data requests never use it: they go through engineClient, whose
	// responses are read in the handler's goroutine and close exactly their
	// own connection when aborted (see newEngineClient).
	client *http.Client
	// engineClient carries fenced data requests, on pooled keep-alive
	// connections to engineBase ("http(s)://host:port").
	engineClient *upstream.Client
	engineBase   string

	life     context.Context // ends when Close begins
	stopLife context.CancelFunc
	wg       sync.WaitGroup // handlers and the scraper

	load atomic.Pointer[scrapeResult]

	mu     sync.Mutex
	closed bool
	table  lease.Table
	live   map[string]*attempt // by attempt id: attempts whose proxy is running
	// liveByRequest holds the attempts of live by their logical request, so that a new
	// epoch finds the attempts it supersedes without scanning every live one.
	liveByRequest map[string][]*attempt
	ended         map[string]AttemptInfo // recently ended, by attempt id
	endedFIFO     []endedRef             // ended attempts, oldest first, to bound ended
	changed       chan struct{}          // closed and cleared when an attempt starts or ends
	lastSweep     time.Time
}

// endedRef names one entry of Agent.ended, for its eviction.
type endedRef struct {
	id string
	at time.Time
}

// Start listens on cfg.Listen and serves until Close. The engine need not be
// up yet: the scrape reports it down until it answers.
func Start(cfg Config) (*Agent, error) {
	cfg, engine, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The model directory is hashed once, before serving: the engine loaded its weights at
	// its own start, and a directory that cannot be read is a configuration mistake to
	// report now, not a fingerprint to leave out quietly.
	var content string
	if cfg.ModelDir != "" {
		var files []string
		if content, files, err = ContentDigest(cfg.ModelDir); err != nil {
			return nil, fmt.Errorf("agent: --model-dir: %w", err)
		}
		cfg.Logger.Info("model directory hashed", "dir", cfg.ModelDir, "content_sha256", content, "files", files)
	}
	secret := secretfile.Fixed(cfg.Secret)
	if cfg.SecretFile != "" {
		if secret, err = secretfile.Load(cfg.SecretFile); err != nil {
			return nil, fmt.Errorf("agent: --secret-file: %w", err)
		}
	}
	engineClient, err := newEngineClient()
	if err != nil {
		return nil, fmt.Errorf("agent: engine client: %w", err)
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("agent: listen on %s: %w", cfg.Listen, err)
		}
	}
	var metricsLn net.Listener
	if cfg.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			ln.Close()
			return nil, fmt.Errorf("agent: --metrics-listen %s: %w", cfg.MetricsListen, err)
		}
	}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // bytes pass through as the engine sent them
	}
	life, stopLife := context.WithCancel(context.Background())
	a := &Agent{
		cfg:           cfg,
		engine:        engine,
		log:           cfg.Logger,
		ln:            ln,
		client:        &http.Client{Transport: transport},
		life:          life,
		stopLife:      stopLife,
		live:          make(map[string]*attempt),
		liveByRequest: make(map[string][]*attempt),
		ended:         make(map[string]AttemptInfo),
		content:       content,
		engineClient:  engineClient,
		engineBase:    engine.Scheme + "://" + engine.Host,
		secret:        secret,
		metricsLn:     metricsLn,
	}
	a.metrics = newAgentMetrics(a)
	a.url = "http://" + loopbackURLHost(ln.Addr().(*net.TCPAddr))
	a.proxy = a.newPassthrough(transport)
	a.srv = newDataServer(a.tracked(a.requireSecret(a.routes())), a.log)
	if secret == nil {
		a.log.Warn("no agent secret configured: control calls are accepted from loopback clients only, and data requests from anyone who reaches the agent")
	}
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		_ = a.srv.Serve(ln) // returns when Close closes the listener
	}()
	go a.scrapeLoop()
	if metricsLn != nil {
		a.metricsURL = "http://" + loopbackURLHost(metricsLn.Addr().(*net.TCPAddr))
		a.metricsSrv = &http.Server{Handler: a.tracked(a.metricsRoutes()), ReadHeaderTimeout: 30 * time.Second,
			ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			_ = a.metricsSrv.Serve(metricsLn)
		}()
	}
	if cfg.SecretFile != "" {
		// A Kubernetes Secret volume changes the file in place, with no signal.
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			secret.Watch(a.life, cfg.SecretPoll, "agent secret", a.log, a.metrics.secretReload)
		}()
	}
	return a, nil
}

// MetricsURL returns the metrics listener's base URL ("" without Config.MetricsListen).
func (a *Agent) MetricsURL() string { return a.metricsURL }

// loopbackURLHost turns a bound address into a host:port a client can dial:
// an unspecified address (":8101") is reached on 127.0.0.1.
func loopbackURLHost(addr *net.TCPAddr) string {
	ip := addr.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(addr.Port))
}

// URL returns the agent's base URL, "http://127.0.0.1:PORT".
func (a *Agent) URL() string { return a.url }

// dataPaths are the engine endpoints that generate or embed: a request to one of them
// that carries a lease is fenced (serveData). Every API the gateway serves is here; one
// missing would run its attempts unfenced, so a rerun would have no proof that the
// earlier attempt stopped.
var dataPaths = []string{
	"/v1/chat/completions",
	"/v1/completions",
	"/v1/messages",
	"/v1/responses",
	"/v1/embeddings",
}

// routes builds the agent's HTTP surface (see the package comment).
func (a *Agent) routes() http.Handler {
	mux := http.NewServeMux()
	for _, path := range dataPaths {
		mux.HandleFunc("POST "+path, a.serveData)
	}
	control := func(h http.HandlerFunc) http.Handler { return a.metrics.counted(kindControl, a.control(h)) }
	mux.Handle("POST "+PathRenew, control(a.serveRenew))
	mux.Handle("POST "+PathCancel, control(a.serveCancel))
	mux.Handle("GET "+PathAttempts, control(a.serveAttempts))
	mux.HandleFunc("GET "+PathHealth, a.serveHealth)
	mux.Handle("GET "+PathMetrics, a.metrics.handler())
	mux.HandleFunc("/fencegate/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no agent endpoint "+r.Method+" "+r.URL.Path)
	})
	mux.Handle("/", a.metrics.counted(kindPassthrough, a.proxy))
	return mux
}

// tracked makes Close wait for running handlers. A request arriving once
// Close has begun gets 503.
func (a *Agent) tracked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			writeError(w, http.StatusServiceUnavailable, "agent_closing", "the agent is shutting down")
			return
		}
		a.wg.Add(1)
		a.mu.Unlock()
		defer a.wg.Done()
		h.ServeHTTP(w, r)
	})
}

// errAgentClosed is the cause given to attempts aborted by Close.
var errAgentClosed = errors.New("agent: closed")

// Close stops listening, aborts every live attempt (closing its engine
// connection), and returns once every handler and background goroutine has
// exited.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	live := make([]*attempt, 0, len(a.live))
	for _, at := range a.live {
		live = append(live, at)
	}
	a.mu.Unlock()

	a.stopLife()
	err := a.srv.Close() // closes the listener and every downstream connection
	if a.metricsSrv != nil {
		a.metricsSrv.Close()
	} else if a.metricsLn != nil {
		a.metricsLn.Close()
	}
	for _, at := range live {
		a.abort(at, errAgentClosed)
	}
	a.wg.Wait()
	a.client.CloseIdleConnections()
	a.engineClient.CloseIdle()
	if err != nil {
		return fmt.Errorf("agent: closing the server: %w", err)
	}
	return nil
}
