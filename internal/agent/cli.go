package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fencegate/fencegate/internal/cli"
	"github.com/fencegate/fencegate/internal/logging"
	"github.com/fencegate/fencegate/internal/secretfile"
)

// Main runs the agent as a process, for `fencegate agent`: it parses args,
// serves until SIGINT or SIGTERM, then closes; SIGHUP reads the secret file again.
// It prints one line with the agent's URL once it is listening; the log goes to
// stderr.
func Main(args []string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout, nil)
}

// run is Main with the stop signal as a context and the logger given, so
// tests can drive it.
func run(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	cfg, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if logger == nil {
		if logger, err = logging.New(cfg.LogFormat, os.Stderr); err != nil {
			return err
		}
	}
	cfg.Logger = logger
	a, err := Start(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fencegate agent for %s engine %s listening at %s\n", cfg.EngineKind, cfg.Engine, a.URL())
	if u := a.MetricsURL(); u != "" {
		fmt.Fprintf(stdout, "fencegate agent metrics at %s%s, the engine's at %s%s\n", u, PathOwnMetrics, u, PathEngineMetrics)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return a.Close()
		case <-hup:
			if cfg.SecretFile == "" {
				logger.Info("SIGHUP: no --secret-file to read again")
				continue
			}
			if changed, err := a.ReloadSecret(); err != nil {
				logger.Error("agent secret not read again; keeping the secrets read last", "err", err)
			} else {
				logger.Info("agent secret read again", "changed", changed, "secrets", a.secret.Secrets().Len())
			}
		}
	}
}

// parseFlags turns command-line flags into a Config.
func parseFlags(args []string, out io.Writer) (Config, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(out)
	var cfg Config
	fingerprint := fingerprintFlag{}
	fs.StringVar(&cfg.Engine, "engine", "", "engine base URL, e.g. http://127.0.0.1:8000 (required)")
	fs.StringVar(&cfg.Listen, "listen", defaultListen, "address to listen on")
	fs.StringVar(&cfg.SecretFile, "secret-file", "", "file holding the secret every request (data and control) must send as "+HeaderAgentKey+
		"; one per line, at most two, either accepted (to rotate it); read again when it changes and on SIGHUP")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "", "address serving, without the secret, GET /metrics (the agent's) and GET /engine/metrics (the engine's)")
	fs.StringVar(&cfg.EngineKind, "engine-kind", KindGeneric, "generic, vllm or sglang")
	fs.StringVar(&cfg.ModelDir, "model-dir", "", "the engine's model directory, whose answer-deciding files are hashed into the fingerprint (content_sha256)")
	fs.Var(fingerprint, "fingerprint", "key=value label added to the replica fingerprint (repeatable)")
	fs.DurationVar(&cfg.ScrapeEvery, "scrape-every", defaultScrapeEvery, "interval of the engine /metrics scrape")
	fs.StringVar(&cfg.LogFormat, "log-format", logging.JSON, "json or text")
	if err := cli.Parse(fs, args, "agent"); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, cli.Usagef("agent: unexpected arguments %q", fs.Args())
	}
	if cfg.Engine == "" {
		return cfg, fmt.Errorf("agent: --engine is required")
	}
	if cfg.SecretFile != "" {
		// Read now, so that a missing or bad file is reported before anything starts.
		if _, err := secretfile.Load(cfg.SecretFile); err != nil {
			return cfg, fmt.Errorf("agent: --secret-file: %w", err)
		}
	}
	if len(fingerprint) > 0 {
		cfg.Fingerprint = fingerprint
	}
	return cfg, nil
}

// fingerprintFlag collects repeated --fingerprint key=value flags.
type fingerprintFlag map[string]string

func (f fingerprintFlag) String() string {
	pairs := make([]string, 0, len(f))
	for k, v := range f {
		pairs = append(pairs, k+"="+v)
	}
	return strings.Join(pairs, ",")
}

func (f fingerprintFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	f[k] = v
	return nil
}
