package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/cli"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server"
	"github.com/fencegate/fencegate/internal/logging"
	"go.opentelemetry.io/otel/trace"
)

// serveHelp and serveEnvHelp frame serve's flags in `fencegate serve --help`.
const (
	serveHelp = `Usage: fencegate serve --config FILE [--log-format json|text]

Runs the gateway: the API on listen, the operator's endpoints on admin_listen (or on the
same listener). SIGHUP reloads the configuration; docs/configuration.md says which keys
need a restart instead. SIGTERM drains: running requests get shutdown.drain_grace.

Flags:
`
	serveEnvHelp = `
Environment:
  FENCEGATE_STORE        replaces the configuration's store (sqlite:PATH, postgres://...,
                         memory:), so that a DSN holding a password can come from a secret
  OTEL_TRACES_EXPORTER   otlp exports spans over OTLP/HTTP, none turns that off; setting
                         OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
                         also turns it on (off by default)
  OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
                         read by the OpenTelemetry exporter as its specification says
                         (headers, timeout, compression, ...; the service is "fencegate")
  GOGC, GOMEMLIMIT       the garbage collector's settings; unset, serve uses GOGC=400 and
                         GOMEMLIMIT at 90% of the container's memory limit
`
)

func serve(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveHelp)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), serveEnvHelp)
	}
	path := fs.String("config", "", "path to the YAML configuration (required); SIGHUP reloads it")
	format := fs.String("log-format", logging.JSON, "json or text")
	if err := cli.Parse(fs, args, "serve"); err != nil {
		return err
	}
	if *path == "" {
		return cli.Usagef("serve: --config is required (fencegate serve --help lists its flags)")
	}
	if fs.NArg() > 0 {
		return cli.Usagef("serve: unexpected arguments %q", fs.Args())
	}
	// Lines are written in batches (docs/operations.md, "Logs"): an access-log line per
	// request written on its own costs a system call each.
	log, flushLog, err := logging.NewBuffered(*format, os.Stderr)
	if err != nil {
		return err
	}
	defer flushLog()
	tuneGC(log)
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	tracer, stopTracing, err := setupTracing(ctx)
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(flush); err != nil {
			log.Warn("spans not exported at exit", "err", err)
		}
	}()
	return runGateway(ctx, cfg, *path, log, tracer, stdout)
}

// storeEnv names the environment variable that, when set, replaces the configuration's
// store: a DSN that holds a password can then come from a secret store (a Kubernetes Secret)
// while the rest of the configuration lives somewhere readable (a ConfigMap).
const storeEnv = "FENCEGATE_STORE"

// loadConfig reads and validates the configuration as serve and check use it.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		return nil, err
	}
	if dsn := os.Getenv(storeEnv); dsn != "" {
		cfg.Store = dsn
		// Validate again for the store alone; everything else was filled and checked
		// already, and validating a validated configuration changes nothing. The DSN is
		// not quoted: it may hold a password.
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("%s: not sqlite:PATH, postgres://... or memory:", storeEnv)
		}
	}
	return cfg, nil
}

// runGateway serves cfg until ctx ends, then drains in-flight requests for a while. With a
// configuration file, SIGHUP reloads it (running streams finish on what they started with;
// an invalid file is refused, logged, and the running configuration kept).
func runGateway(ctx context.Context, cfg *config.Config, path string, log *slog.Logger, tracer trace.TracerProvider, stdout io.Writer) error {
	gw, err := gateway.New(ctx, cfg, gateway.Options{Logger: log, ConfigPath: path, LoadConfig: loadConfig, TracerProvider: tracer})
	if err != nil {
		return err
	}
	defer gw.Close()
	if path != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					if err := gw.ReloadFile(); err != nil {
						log.Error("configuration not reloaded; keeping the running one", "err", err)
					}
				}
			}
		}()
	}
	ln, err := listen(cfg.Listen, cfg.Server.MaxConnections)
	if err != nil {
		return err
	}
	srv := newHTTPServer(cfg, gw.Handler(), log)
	var (
		admin   httpServer
		adminLn net.Listener
	)
	if cfg.AdminListen != "" {
		if adminLn, err = listen(cfg.AdminListen, cfg.Server.MaxConnections); err != nil {
			ln.Close()
			return err
		}
		admin = newHTTPServer(cfg, gw.AdminHandler(), log)
	}
	scheme := "http"
	if cfg.TLS.Enabled() {
		certs, err := newCertReloader(cfg.TLS.CertFile, cfg.TLS.KeyFile, log)
		if err != nil {
			ln.Close()
			if adminLn != nil {
				adminLn.Close()
			}
			return err
		}
		scheme = "https"
		hs, as := srv.(*http.Server), (*http.Server)(nil)
		if admin != nil {
			as = admin.(*http.Server)
		}
		hs.TLSConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
			// HTTP/1.1 only, as without TLS: a client leaving or stalling is detected
			// the same way whether or not the listener encrypts, and streams gain
			// nothing from multiplexing. A non-nil empty TLSNextProto keeps net/http
			// from adding h2.
			NextProtos: []string{"http/1.1"},
		}
		hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		ln = tls.NewListener(ln, hs.TLSConfig)
		if as != nil {
			// Admin keys cross the admin listener: it is encrypted like the public one.
			as.TLSConfig, as.TLSNextProto = hs.TLSConfig, hs.TLSNextProto
			adminLn = tls.NewListener(adminLn, as.TLSConfig)
		}
	}
	gw.Start()
	fmt.Fprintf(stdout, "fencegate gateway listening on %s://%s\n", scheme, ln.Addr())
	log.Info("gateway started", "gateway_id", gw.ID(), "store", redact(cfg.Store), "store_connected", gw.StoreConnected(),
		"listen", ln.Addr().String(), "tls", cfg.TLS.Enabled())
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if admin != nil {
		fmt.Fprintf(stdout, "fencegate admin listening on %s://%s\n", scheme, adminLn.Addr())
		log.Info("admin listener started", "listen", adminLn.Addr().String())
		go func() { errc <- admin.Serve(adminLn) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Let running requests finish for a while; those still running then get an honest final
	// error event rather than a cut connection. New requests meanwhile get 503. Drain
	// returns a few seconds after the grace whatever the clients do; connections still
	// open then (clients that accept nothing) are closed.
	grace := gw.DrainGrace() // the running configuration's: a reload may have changed it
	log.Info("draining", "grace", grace.String())
	drain, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	gw.Drain(drain)
	shutdown, cancel2 := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel2()
	if admin != nil {
		// The admin listener served /readyz (draining) through the drain; it goes now.
		admin.Close()
	}
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("shutdown: %w", err)
		}
	}
	return nil
}

// listen opens a TCP listener on addr, holding at most maxConns connections open at once
// (-1: no bound): past it, new connections wait in the kernel's accept queue instead of
// costing the gateway a goroutine and buffers each.
func listen(addr string, maxConns int) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if maxConns > 0 {
		ln = h1server.LimitListener(ln, maxConns)
	}
	return ln, nil
}

// httpServer is what serves a listener: the gateway's own HTTP/1.1 server for plaintext,
// net/http's for TLS.
type httpServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// newHTTPServer applies the server section's bounds. There is no ReadTimeout or
// WriteTimeout: a response may stream for as long as its request runs (the gateway moves
// each response's write deadline as it goes), and the body's own deadline is set by the
// handler around reading it (server.body_read_timeout), so that it cannot end a stream.
// Plaintext listeners are served by h1server where the platform allows it (Linux), TLS
// ones by net/http (docs/design.md, "The client's server").
func newHTTPServer(cfg *config.Config, h http.Handler, log *slog.Logger) httpServer {
	c := cfg.Server
	if !cfg.TLS.Enabled() && !c.NetHTTP && h1server.Available() {
		return &h1server.Server{
			Handler:           h,
			ReadHeaderTimeout: c.ReadHeaderTimeout.D(),
			IdleTimeout:       c.IdleTimeout.D(),
			MaxHeaderBytes:    c.MaxHeaderBytes,
			Log:               log,
		}
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout.D(),
		IdleTimeout:       c.IdleTimeout.D(),
		MaxHeaderBytes:    c.MaxHeaderBytes,
	}
}

// shutdownWait is how long idle connections get to close after the drain.
const shutdownWait = time.Second

// redact hides a password in a store DSN before it is logged.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
