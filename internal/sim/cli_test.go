package sim

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestMainServesUntilStopped(t *testing.T) {
	ctx, stop := context.WithCancel(testContext(t))
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--name", "cli", "--decode-per-token", "0s", "--max-waiting", "3"}, w)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the banner: %v", err)
	}
	i := strings.Index(line, "http://127.0.0.1:")
	if i < 0 || !strings.Contains(line, `"cli"`) {
		t.Fatalf("banner %q lacks the name or the URL", line)
	}
	url := strings.TrimSpace(line[i:])
	status, _ := postJSON(t, newClient(t), url+"/v1/chat/completions", jsonBody(t, chatRequest("from the cli", nil)), nil)
	if status != http.StatusOK {
		t.Errorf("status %d", status)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--model", "m", "--restart-after", "2s", "--legacy-errors", "--cache-config", "block_size=32,cache_dtype=fp8", "--revision", "r9", "--weights", "w", "--cache-fault", "block-boundary"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model != "m" || cfg.RestartAfter != 2*time.Second || !cfg.LegacyErrors || cfg.DecodePerToken != 20*time.Millisecond ||
		cfg.Addr != "127.0.0.1:9001" || cfg.Revision != "r9" || cfg.Weights != "w" || cfg.CacheConfig["block_size"] != "32" || cfg.CacheConfig["cache_dtype"] != "fp8" ||
		cfg.CacheFault != CacheFaultBlockBoundary {
		t.Errorf("config = %+v", cfg)
	}
	for _, bad := range [][]string{{"--max-running", "x"}, {"--cache-config", "novalue"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
	if err := run(context.Background(), []string{"-h"}, io.Discard); err != nil {
		t.Errorf("-h: %v", err)
	}
}
