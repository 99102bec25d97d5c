package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
)

// probeSim starts a simulated replica (vLLM's endpoints) for check --probe.
func probeSim(t *testing.T, cfg sim.Config) *sim.Server {
	t.Helper()
	s, err := sim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runProbe writes yaml to a file and runs check --probe on it.
func runProbe(t *testing.T, yaml string) (string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"check", "--probe", "--config", path}, &out, &out)
	code := exitCode(err, &out)
	return out.String(), code
}

// section is the paragraph check --probe printed about one replica.
func section(t *testing.T, out, replica string) string {
	t.Helper()
	for _, p := range strings.Split(out, "\n\n") {
		if strings.Contains(strings.SplitN(p, "\n", 2)[0], " "+replica+" ") {
			return p
		}
	}
	t.Fatalf("no paragraph about %s in\n%s", replica, out)
	return ""
}

// Replicas that serve the configured model and the same APIs pass, and the report says
// what the engine is, its version, its fingerprint and its APIs.
func TestCheckProbePasses(t *testing.T) {
	a := probeSim(t, sim.Config{Name: "a", Model: "sim-model", Revision: "r7", Version: "0.11.2"})
	b := probeSim(t, sim.Config{Name: "b", Model: "sim-model", Revision: "r7", Version: "0.11.2"})
	out, code := runProbe(t, fmt.Sprintf("store: \"memory:\"\nmodels:\n  - name: sim-model\n    replicas:\n      - {name: a, url: %s}\n      - {name: b, url: %s}\n", a.URL(), b.URL()))
	if code != 0 {
		t.Fatalf("exit status %d\n%s", code, out)
	}
	for _, name := range []string{"a", "b"} {
		p := section(t, out, name)
		for _, want := range []string{": ok", "engine:      vllm 0.11.2", "serves:      sim-model", "APIs:        chat, completions, messages, responses\n",
			"revision=r7", "max_model_len=8192", "block_size=16"} {
			if !strings.Contains(p+"\n", want) {
				t.Errorf("%s: %q missing from\n%s", name, want, p)
			}
		}
	}
	if !strings.Contains(out, "note: no replica of sim-model serves /v1/embeddings") || !strings.Contains(out, "probe: all 2 replicas passed") {
		t.Fatalf("no summary\n%s", out)
	}
}

// A replica that serves another model name, one that serves other APIs than the rest of its
// pool (an embedding model, which vLLM serves without /v1/messages), and one that does not
// answer: each fails with its reason, and the exit status is 1.
func TestCheckProbeFails(t *testing.T) {
	good := probeSim(t, sim.Config{Name: "good", Model: "sim-model"})
	renamed := probeSim(t, sim.Config{Name: "renamed", Model: "other-model"})
	chat := probeSim(t, sim.Config{Name: "chat", Model: "mixed"})
	embed := probeSim(t, sim.Config{Name: "embed", Model: "mixed", Task: sim.TaskEmbed})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	out, code := runProbe(t, fmt.Sprintf(`store: "memory:"
models:
  - name: sim-model
    replicas:
      - {name: good, url: %s}
      - {name: renamed, url: %s}
      - {name: down, url: %s}
  - name: mixed
    replicas:
      - {name: chat, url: %s}
      - {name: embed, url: %s}
`, good.URL(), renamed.URL(), down, chat.URL(), embed.URL()))
	if code != 1 || !strings.Contains(out, "check --probe: 4 of 5 replicas failed") {
		t.Fatalf("exit status %d\n%s", code, out)
	}
	for replica, wants := range map[string][]string{
		"good":    {": ok"},
		"renamed": {": FAILED", "serves:      other-model", "problem:     incompatible: serves other-model, not sim-model"},
		"down":    {": FAILED", "problem:     unhealthy: probe: ", "connection refused"},
		"embed":   {": FAILED", "APIs:        embeddings\n", "does not serve /v1/chat/completions, /v1/completions, /v1/messages, /v1/responses, which another replica of mixed serves"},
		"chat":    {": FAILED", "does not serve /v1/embeddings, which another replica of mixed serves"},
	} {
		p := section(t, out, replica) + "\n"
		for _, want := range wants {
			if !strings.Contains(p, want) {
				t.Errorf("%s: %q missing from\n%s", replica, want, p)
			}
		}
	}
}

// Without --probe, check contacts no replica: a configuration naming unreachable ones passes.
func TestCheckWithoutProbeContactsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	os.WriteFile(path, []byte("store: \"memory:\"\nmodels:\n  - name: m\n    replicas: [{url: 'http://127.0.0.1:1'}]\n"), 0o600)
	if err := run(context.Background(), []string{"check", "--config", path}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
}
