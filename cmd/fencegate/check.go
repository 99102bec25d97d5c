package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/internal/cli"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/secretfile"
)

// check validates a configuration as serve would, without listening or opening the store,
// so a deployment pipeline (or an init container) can reject a bad file before it replaces
// a running gateway. It also checks what serve would only find out later or at run time:
// that the files the configuration names can be read.
func check(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkHelp)
		fs.PrintDefaults()
	}
	path := fs.String("config", "", "path to the YAML configuration (required)")
	probe := fs.Bool("probe", false, "also contact every replica: its health, the model names it serves, its credentials, fingerprint, engine kind and version, and which APIs it serves")
	if err := cli.Parse(fs, args, "check"); err != nil {
		return err
	}
	if *path == "" {
		return cli.Usagef("check: --config is required (fencegate check --help lists its flags)")
	}
	if fs.NArg() > 0 {
		return cli.Usagef("check: unexpected arguments %q", fs.Args())
	}
	// loadConfig validates everything, the TLS pair included, and applies FENCEGATE_STORE
	// as serve does, so the store checked is the store serve would open.
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if err := checkFiles(cfg); err != nil {
		return fmt.Errorf("config %s: %w", *path, err)
	}
	replicas := 0
	for _, m := range cfg.Models {
		replicas += len(m.Replicas)
	}
	fmt.Fprintf(stdout, "ok: %d models, %d replicas\n", len(cfg.Models), replicas)
	if cfg.TLS.Enabled() {
		if cert, err := config.LoadKeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile); err == nil && cert.Leaf != nil {
			fmt.Fprintf(stdout, "tls: certificate valid until %s\n", cert.Leaf.NotAfter.UTC().Format("2006-01-02 15:04:05 MST"))
		}
	}
	// Who may call the operator's endpoints; admin keys kept in the store (fencegate keys
	// create --admin) count too, but check does not open the store.
	access := cfg.AdminAccess(false)
	if cfg.AdminListen == "" && len(cfg.Auth.AdminKeys) == 0 && cfg.Auth.UsesStoreKeys() {
		access += " (unless the store holds an admin key)"
	}
	fmt.Fprintln(stdout, access)
	if cfg.Auth.UsesStoreKeys() && len(cfg.Auth.Keys)+len(cfg.Auth.AdminKeys) == 0 && strings.HasPrefix(cfg.Store, "postgres") {
		// Said before it is deployed: the one setting whose effect shows only in an outage.
		fmt.Fprintln(stdout, "note: started while the store is unreachable, this gateway answers every API request 503 until the store comes, since it cannot tell whether the store holds keys; list keys here, or set auth.store_keys: false if the store holds none")
	}
	if cfg.Auth.HasPlaintextKeys() {
		// Served, but the file now holds secrets: say so before it is deployed.
		fmt.Fprintln(stdout, "warning: API keys in plain text (key:); write key_sha256: (the hex SHA-256 of the key), or keep them in the store with fencegate keys")
	}
	if *probe {
		return probeReplicas(ctx, cfg, stdout)
	}
	return nil
}

// checkHelp frames check's flags in `fencegate check --help`.
const checkHelp = `Usage: fencegate check --config FILE [--probe]

Validates a configuration as serve would, and the files it names, without listening or
opening the store. With --probe it also contacts every replica as a starting gateway
would and reports what each serves. Exit status 0 when everything passed, 1 when the
configuration or a replica did not, 2 on a mistake in the command line.
FENCEGATE_STORE replaces the configuration's store, as for serve.

Flags:
`

// checkFiles checks the files a valid configuration names but Validate does not open.
func checkFiles(cfg *config.Config) error {
	if f := cfg.AgentSecretFile; f != "" {
		// One or two secrets, one per line (the current one, then the next): what the
		// gateway and the agents read. Agents refuse an empty --secret-file, so an empty
		// one here can only be a mistake.
		if _, err := secretfile.Load(f); err != nil {
			return fmt.Errorf("agent_secret_file: %w", err)
		}
	}
	for i, m := range cfg.Models {
		if err := checkEngineKeys(m, fmt.Sprintf("models[%d]", i)); err != nil {
			return err
		}
	}
	if p, ok := strings.CutPrefix(cfg.Store, "sqlite:"); ok {
		// The store creates the database file but not its directory; a missing directory
		// would otherwise surface only when serve starts.
		if p == "" || strings.ContainsAny(p, "?#") {
			return fmt.Errorf("store: sqlite path %q must be a file name without '?' or '#'", p)
		}
		dir := filepath.Dir(p)
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("store: the directory of %s: %w", p, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("store: %s, the directory of %s, is not a directory", dir, p)
		}
	}
	return nil
}

// checkEngineKeys checks the engine credentials of a pool as the gateway reads them at
// start: each replica's own api_key_file or api_key_env, else the model's; a file must
// hold a key, a variable must be set.
func checkEngineKeys(m config.Model, field string) error {
	check := func(file, env, field string) error {
		switch {
		case file != "":
			b, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("%s.api_key_file: %w", field, err)
			}
			if strings.TrimSpace(string(b)) == "" {
				return fmt.Errorf("%s.api_key_file: %s is empty", field, file)
			}
		case env != "":
			if strings.TrimSpace(os.Getenv(env)) == "" {
				return fmt.Errorf("%s.api_key_env: the environment variable %s is not set", field, env)
			}
		}
		return nil
	}
	usesModelKey := len(m.Replicas) == 0
	for j, r := range m.Replicas {
		if r.APIKeyFile == "" && r.APIKeyEnv == "" {
			usesModelKey = true
			continue
		}
		if err := check(r.APIKeyFile, r.APIKeyEnv, fmt.Sprintf("%s.replicas[%d]", field, j)); err != nil {
			return err
		}
	}
	if usesModelKey {
		return check(m.APIKeyFile, m.APIKeyEnv, field)
	}
	return nil
}
