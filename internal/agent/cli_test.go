package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/syncbuf"
)

func TestParseFlags(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("  hunter2\nnext-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty, three := filepath.Join(t.TempDir(), "empty"), filepath.Join(t.TempDir(), "three")
	os.WriteFile(empty, []byte("\n"), 0o600)
	os.WriteFile(three, []byte("a\nb\nc\n"), 0o600)
	cfg, err := parseFlags([]string{
		"--engine", "http://127.0.0.1:8000", "--listen", "127.0.0.1:0", "--secret-file", secret,
		"--engine-kind", "sglang", "--fingerprint", "revision=abc", "--fingerprint", "quantization=fp8",
		"--scrape-every", "250ms", "--model-dir", "/models/m", "--metrics-listen", "127.0.0.1:0",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine != "http://127.0.0.1:8000" || cfg.Listen != "127.0.0.1:0" || cfg.SecretFile != secret || cfg.MetricsListen != "127.0.0.1:0" ||
		cfg.EngineKind != KindSGLang || cfg.Fingerprint["revision"] != "abc" || cfg.Fingerprint["quantization"] != "fp8" ||
		cfg.ScrapeEvery != 250*time.Millisecond || cfg.ModelDir != "/models/m" {
		t.Fatalf("config %+v", cfg)
	}
	for _, args := range [][]string{
		{},                                // no engine
		{"--engine", "http://x", "extra"}, // stray argument
		{"--engine", "http://x", "--fingerprint", "novalue"},
		{"--engine", "http://x", "--secret-file", filepath.Join(t.TempDir(), "missing")},
		{"--engine", "http://x", "--secret-file", empty},
		{"--engine", "http://x", "--secret-file", three},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	if _, _, err := (Config{Engine: "http://x", EngineKind: "tgi"}).withDefaults(); err == nil {
		t.Error("unknown engine kind accepted")
	}
	if _, _, err := (Config{Engine: "localhost:8000"}).withDefaults(); err == nil {
		t.Error("engine URL without scheme accepted")
	}
}

// The command prints its URL, warns when it has no secret, and stops cleanly.
func TestRunStartsAndStops(t *testing.T) {
	var out, logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // already stopped: run must start, print, and close
	err := run(ctx, []string{"--engine", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}, &out,
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "listening at http://127.0.0.1:") {
		t.Fatalf("stdout %q", out.String())
	}
	if !strings.Contains(logs.String(), "no agent secret configured") {
		t.Fatalf("log %q", logs.String())
	}
}
