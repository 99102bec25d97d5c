package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencegate/fencegate/internal/cli"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/store"
)

const keysUsage = `Usage:
  fencegate keys create --id ID [--models M1,M2] [--max-concurrent N] [--rpm N] [--tpm N] [--traces off|errors|all] --config FILE
  fencegate keys create --id ID --admin --config FILE
  fencegate keys list --config FILE
  fencegate keys revoke --id ID --config FILE

Keys live in the configuration's store (FENCEGATE_STORE replaces it), which every gateway
sharing it reads within auth.store_refresh. create prints the new key once; only its
SHA-256 is stored. A revoked key's id is never reused. --traces gives the key its own trace
mode, which its requests follow instead of the configuration's traces.mode (default: that one).

A key is a tenant key, which reaches the API (/v1/*) only, or with --admin an admin key,
which reaches the operator's calls (/admin/*, pprof, the full /readyz and /metrics) on every
listener and reads any request's record; an admin key has no models or limits of its own.
`

// keyPrefix marks fencegate's keys, so that one found in a log or a repository is
// recognisable (and can be searched for by secret scanners).
const keyPrefix = "fg-"

// keyIDPattern keeps ids fit for log fields, metric labels and Redis key names.
var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return cli.Usagef("keys: no subcommand given (create, list or revoke)")
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, keysUsage)
		return nil
	case "create":
		return keysCreate(ctx, args[1:], stdout, stderr)
	case "list":
		return keysList(ctx, args[1:], stdout)
	case "revoke":
		return keysRevoke(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, keysUsage)
	return cli.Usagef("keys: unknown subcommand %q (create, list or revoke)", args[0])
}

// keysFlags is the flag set of one keys subcommand, with the --config every one of them
// takes; usage is its synopsis line.
func keysFlags(sub, usage string, stdout io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	path := fs.String("config", "", "path to the YAML configuration (required): its store holds the keys (FENCEGATE_STORE replaces it)")
	return fs, path
}

// keysParse parses a keys subcommand's flags and opens the store its configuration names.
func keysParse(ctx context.Context, fs *flag.FlagSet, path *string, args []string) (*config.Config, store.Store, error) {
	if err := cli.Parse(fs, args, fs.Name()); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, cli.Usagef("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	if *path == "" {
		return nil, nil, cli.Usagef("%s: --config is required", fs.Name())
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Store == "memory:" {
		return nil, nil, fmt.Errorf("keys: the store is memory:, which keeps nothing; use sqlite:PATH or postgres://")
	}
	st, err := store.Open(ctx, cfg.Store)
	if err != nil {
		return nil, nil, err
	}
	return cfg, st, nil
}

func keysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := keysFlags("create", "fencegate keys create --id ID [--models M1,M2] [--max-concurrent N] [--rpm N] [--tpm N] [--traces off|errors|all]\n         [--weight N] [--priority N] [--fairness-header] [--priority-header] --config FILE\n       fencegate keys create --id ID --admin --config FILE", stdout)
	id := fs.String("id", "", "the key's id, as the journal, logs and metrics name it (required)")
	models := fs.String("models", "", "comma-separated models the key may use (default: every model)")
	maxConc := fs.Int64("max-concurrent", 0, "requests the key may run at once (0: no limit)")
	rpm := fs.Int64("rpm", 0, "requests per minute (0: no limit)")
	tpm := fs.Int64("tpm", 0, "output tokens per minute (0: no limit)")
	traces := fs.String("traces", "", "the key's trace mode, off, errors or all, followed instead of traces.mode (default: traces.mode)")
	admin := fs.Bool("admin", false, "create an admin key (the operator's calls), not a tenant key (the API)")
	weight := fs.Int("weight", 1, "the key's share of a full pool's freed slots against the other keys")
	priority := fs.Int("priority", 0, fmt.Sprintf("the key's class in a full pool's queue, %d to %d: a higher class is served first, the lowest shed first", config.MinPriority, config.MaxPriority))
	fairnessHeader := fs.Bool("fairness-header", false, "the key may name whom a request is for in X-Fencegate-Fairness-Id: those share its turns equally")
	priorityHeader := fs.Bool("priority-header", false, "the key may set a request's class in X-Fencegate-Priority")
	cfg, st, err := keysParse(ctx, fs, path, args)
	if err != nil {
		return err
	}
	defer st.Close()
	if *maxConc < 0 || *rpm < 0 || *tpm < 0 {
		return cli.Usagef("keys create: limits must be >= 0")
	}
	if *weight < 1 {
		return cli.Usagef("keys create: --weight %d must be >= 1", *weight)
	}
	if *priority < config.MinPriority || *priority > config.MaxPriority {
		return cli.Usagef("keys create: --priority %d must be from %d to %d", *priority, config.MinPriority, config.MaxPriority)
	}
	mode, err := traceModeFlag(*traces)
	if err != nil {
		return err
	}
	queued := *weight != 1 || *priority != 0 || *fairnessHeader || *priorityHeader
	if *admin && (*models != "" || *maxConc != 0 || *rpm != 0 || *tpm != 0 || *traces != "" || queued) {
		return cli.Usagef("keys create: --admin keys reach the operator's calls, not the API: --models, --max-concurrent, --rpm, --tpm, --traces and the queue's flags do not apply")
	}
	return createKey(ctx, st, cfg, store.APIKey{ID: *id, Models: splitList(*models), MaxConcurrent: *maxConc, RPM: *rpm, TPM: *tpm, Traces: mode, Admin: *admin,
		Weight: *weight, Priority: *priority, FairnessHeader: *fairnessHeader, PriorityHeader: *priorityHeader}, stdout, stderr)
}

func keysList(ctx context.Context, args []string, stdout io.Writer) error {
	fs, path := keysFlags("list", "fencegate keys list --config FILE", stdout)
	cfg, st, err := keysParse(ctx, fs, path, args)
	if err != nil {
		return err
	}
	defer st.Close()
	return listKeys(ctx, st, cfg, stdout)
}

func keysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := keysFlags("revoke", "fencegate keys revoke --id ID --config FILE", stdout)
	id := fs.String("id", "", "the id of the key to revoke (required)")
	cfg, st, err := keysParse(ctx, fs, path, args)
	if err != nil {
		return err
	}
	defer st.Close()
	return revokeKey(ctx, st, cfg, *id, stderr)
}

// traceModeFlag checks --traces: off, errors or all (in any case), or empty for the
// gateway's traces.mode.
func traceModeFlag(s string) (string, error) {
	switch m := config.TraceMode(strings.ToLower(s)); m {
	case "", config.TracesOff, config.TracesErrors, config.TracesAll:
		return string(m), nil
	}
	return "", cli.Usagef("keys create: --traces %q: want off, errors or all (or no --traces: the gateway's traces.mode)", s)
}

func splitList(s string) []string {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// newKey returns a new secret: 32 random bytes, base64url, after keyPrefix.
func newKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return keyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func createKey(ctx context.Context, st store.Store, cfg *config.Config, k store.APIKey, stdout, stderr io.Writer) error {
	if !keyIDPattern.MatchString(k.ID) {
		return fmt.Errorf("keys create: --id %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", k.ID)
	}
	for _, c := range append(append([]config.APIKey(nil), cfg.Auth.Keys...), cfg.Auth.AdminKeys...) {
		if c.ID == k.ID {
			return fmt.Errorf("keys create: --id %q is a key of the configuration already", k.ID)
		}
	}
	served := map[string]bool{}
	for _, m := range cfg.Models {
		served[m.Name] = true
	}
	for _, m := range k.Models {
		if !served[m] {
			// Allowed (a model may be added later), but probably a typo.
			fmt.Fprintf(stderr, "warning: the configuration serves no model %q\n", m)
		}
	}
	secret, err := newKey()
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(secret))
	k.KeySHA256, k.CreatedAt = hex.EncodeToString(sum[:]), time.Now()
	if err := st.CreateKey(ctx, k); err != nil {
		if errors.Is(err, store.ErrKeyExists) {
			return fmt.Errorf("keys create: a key with id %q exists (revoked keys keep their id)", k.ID)
		}
		return err
	}
	fmt.Fprintln(stdout, secret)
	role := "tenant key (the API)"
	if k.Admin {
		role = "admin key (the operator's calls)"
	}
	fmt.Fprintf(stderr, "%s %s created; it is shown once: the store keeps only its SHA-256\n", role, k.ID)
	if !cfg.Auth.UsesStoreKeys() {
		fmt.Fprintln(stderr, "warning: this configuration sets auth.store_keys: false, so gateways that use it ignore the store's keys")
	}
	return nil
}

func listKeys(ctx context.Context, st store.Store, cfg *config.Config, stdout io.Writer) error {
	keys, err := st.ListKeys(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tMODELS\tMAX_CONCURRENT\tRPM\tTPM\tTRACES\tWEIGHT\tCLASS\tHEADERS\tCREATED\tREVOKED")
	// A key's place in a full pool's queue: its weight, its class, the headers it may set.
	queue := func(weight, class int, fairness, priority bool) string {
		var hs []string
		if fairness {
			hs = append(hs, "fairness")
		}
		if priority {
			hs = append(hs, "priority")
		}
		h := strings.Join(hs, ",")
		if h == "" {
			h = "-"
		}
		return fmt.Sprintf("%d\t%d\t%s", max(weight, 1), class, h)
	}
	limit := func(n int64) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprint(n)
	}
	list := func(ms []string) string {
		if len(ms) == 0 {
			return "*"
		}
		return strings.Join(ms, ",")
	}
	// A key without a trace mode follows the gateway's traces.mode.
	mode := func(m string) string {
		if m == "" {
			return "-"
		}
		return m
	}
	for _, c := range cfg.Auth.Keys {
		fmt.Fprintf(tw, "%s\tconfig\t%s\t%s\t%s\t%s\t%s\t%s\t-\t-\n", c.ID, list(c.Models), limit(int64(c.MaxConcurrent)), limit(int64(c.RPM)), limit(int64(c.TPM)),
			mode(string(c.Traces)), queue(c.Weight, c.Priority, c.FairnessHeader, c.PriorityHeader))
	}
	for _, c := range cfg.Auth.AdminKeys {
		fmt.Fprintf(tw, "%s\tconfig (admin)\t*\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", c.ID)
	}
	for _, k := range keys {
		revoked := "-"
		if k.Revoked() {
			revoked = k.RevokedAt.UTC().Format(time.RFC3339)
		}
		source := "store"
		if k.Admin {
			source = "store (admin)"
		}
		q := queue(k.Weight, k.Priority, k.FairnessHeader, k.PriorityHeader)
		if k.Admin {
			q = "-\t-\t-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, source, list(k.Models), limit(k.MaxConcurrent), limit(k.RPM), limit(k.TPM),
			mode(k.Traces), q, k.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func revokeKey(ctx context.Context, st store.Store, cfg *config.Config, id string, stderr io.Writer) error {
	if id == "" {
		return fmt.Errorf("keys revoke: --id is required")
	}
	for _, c := range append(append([]config.APIKey(nil), cfg.Auth.Keys...), cfg.Auth.AdminKeys...) {
		if c.ID == id {
			return fmt.Errorf("keys revoke: %q is a key of the configuration: remove it there and reload", id)
		}
	}
	if err := st.RevokeKey(ctx, id, time.Now()); err != nil {
		if errors.Is(err, store.ErrKeyNotFound) {
			return fmt.Errorf("keys revoke: no key with id %q in the store", id)
		}
		return err
	}
	fmt.Fprintf(stderr, "key %s revoked; every gateway sharing the store refuses it within auth.store_refresh (%s)\n", id, cfg.Auth.StoreRefresh.D())
	return nil
}
