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

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/logging"
)

func serve(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	path := fs.String("config", "", "path to the YAML configuration (required); SIGHUP reloads it")
	format := fs.String("log-format", logging.JSON, "json or text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		fs.Usage()
		return fmt.Errorf("serve: --config is required")
	}
	log, err := logging.New(*format, os.Stderr)
	if err != nil {
		return err
	}
	tuneGC(log)
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	stopTracing, err := setupTracing(ctx)
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
	return runGateway(ctx, cfg, *path, log, stdout)
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
func runGateway(ctx context.Context, cfg *config.Config, path string, log *slog.Logger, stdout io.Writer) error {
	gw, err := gateway.New(ctx, cfg, gateway.Options{Logger: log, ConfigPath: path, LoadConfig: loadConfig})
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
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	scheme := "http"
	if cfg.TLS.Enabled() {
		certs, err := newCertReloader(cfg.TLS.CertFile, cfg.TLS.KeyFile, log)
		if err != nil {
			ln.Close()
			return err
		}
		scheme = "https"
		srv.TLSConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
			// HTTP/1.1 only, as without TLS: a client leaving or stalling is detected
			// the same way whether or not the listener encrypts, and streams gain
			// nothing from multiplexing. A non-nil empty TLSNextProto keeps net/http
			// from adding h2.
			NextProtos: []string{"http/1.1"},
		}
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	gw.Start()
	fmt.Fprintf(stdout, "fencegate gateway listening on %s://%s\n", scheme, ln.Addr())
	log.Info("gateway started", "gateway_id", gw.ID(), "store", redact(cfg.Store), "listen", ln.Addr().String(), "tls", cfg.TLS.Enabled())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Let running requests finish for a while; those still running then get an honest final
	// error event rather than a cut connection. New requests meanwhile get 503. Drain
	// returns a few seconds after the grace whatever the clients do; connections still
	// open then (clients that accept nothing) are closed.
	grace := cfg.Shutdown.DrainGrace.D()
	log.Info("draining", "grace", grace.String())
	drain, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	gw.Drain(drain)
	shutdown, cancel2 := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel2()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("shutdown: %w", err)
		}
	}
	return nil
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
