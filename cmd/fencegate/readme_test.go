package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// quickStart returns the README's "Put it in front of your engines" section: its YAML
// configuration and its shell commands, one per line (continuations joined).
func quickStart(t *testing.T) (yamlText string, commands []string) {
	t.Helper()
	var section []docBlock
	for _, b := range docBlocks(t) {
		if b.file == "README.md" {
			section = append(section, b)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	from, to := 0, len(lines)
	for i, l := range lines {
		if l == "## Put it in front of your engines" {
			from = i + 1
		} else if from > 0 && strings.HasPrefix(l, "## ") && to == len(lines) {
			to = i + 1
		}
	}
	if from == 0 {
		t.Fatal("the README has no section \"Put it in front of your engines\"")
	}
	for _, b := range section {
		if b.line < from || b.line > to {
			continue
		}
		switch b.info {
		case "yaml":
			yamlText = b.text
		case "sh":
			joined := strings.ReplaceAll(b.text, "\\\n", "")
			for _, l := range strings.Split(joined, "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
					commands = append(commands, l)
				}
			}
		}
	}
	if yamlText == "" || len(commands) == 0 {
		t.Fatalf("the quick start has no configuration or no commands")
	}
	return yamlText, commands
}

// The README's quick start, run as written against two simulated engines that serve its
// model: its configuration passes check --probe, the gateway serves it, /readyz answers,
// a key is created, and the chat, Messages and Responses requests, with the key in either
// header, are answered.
func TestReadmeQuickStartRunsAsWritten(t *testing.T) {
	yamlText, commands := quickStart(t)
	parsed, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatalf("the quick start's configuration: %v", err)
	}
	model := parsed.Models[0].Name
	dir := t.TempDir()
	t.Setenv(storeEnv, "sqlite:"+filepath.Join(dir, "fencegate.db"))
	// The engines are simulated on loopback, the listeners on free ports.
	for _, r := range parsed.Models[0].Replicas {
		s, err := sim.Start(sim.Config{Name: r.Name, Model: model})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		yamlText = strings.Replace(yamlText, r.URL, s.URL(), 1)
	}
	yamlText = strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:0", "127.0.0.1:9090", "127.0.0.1:0").Replace(yamlText)
	path := filepath.Join(dir, "fencegate.yaml")
	if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vars := map[string]string{}
	hosts := strings.NewReplacer() // the README's addresses, once the gateway listens
	served := make(chan error, 1)
	answered := 0
	for _, c := range commands {
		c = hosts.Replace(c)
		if k, cmd, ok := strings.Cut(c, "=$("); ok && strings.HasPrefix(k, "export ") {
			// export KEY=$(./fencegate keys create ...)
			w := words(strings.TrimSuffix(cmd, ")"), vars)
			var out bytes.Buffer
			if err := run(ctx, configArg(w[1:], path), &out, io.Discard); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			vars[strings.TrimPrefix(k, "export ")] = strings.TrimSpace(out.String())
			continue
		}
		w := words(c, vars)
		switch {
		case w[0] == "go":
			// The build: this test is the program it builds.
			if strings.Join(w, " ") != "go build -o fencegate ./cmd/fencegate" {
				t.Fatalf("unexpected build command %q", c)
			}
		case w[0] == "./fencegate" && w[1] == "check":
			var out bytes.Buffer
			err := run(ctx, configArg(w[1:], path), &out, &out)
			if err != nil || !strings.Contains(out.String(), "probe: all 2 replicas passed") {
				t.Fatalf("%s: %v\n%s", c, err, out.String())
			}
		case w[0] == "./fencegate" && w[1] == "serve":
			pr, pw := io.Pipe()
			go func() {
				served <- run(ctx, configArg(w[1:], path), pw, io.Discard)
				pw.Close()
			}()
			sc := bufio.NewScanner(pr)
			var gw, admin string
			for (gw == "" || admin == "") && sc.Scan() {
				if u, ok := strings.CutPrefix(sc.Text(), "fencegate gateway listening on "); ok {
					gw = u
				}
				if u, ok := strings.CutPrefix(sc.Text(), "fencegate admin listening on "); ok {
					admin = u
				}
			}
			if admin == "" {
				t.Fatalf("%s: it never said where it listens: %v", c, <-served)
			}
			go io.Copy(io.Discard, pr)
			hosts = strings.NewReplacer("http://127.0.0.1:8080", gw, "http://127.0.0.1:9090", admin)
		case w[0] == "curl":
			resp, body := curl(t, w)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", c, resp.StatusCode, body)
			}
			var got struct {
				Object, Type string
				Ready        *bool
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%s: %v\n%s", c, err, body)
			}
			switch u := w[slices.IndexFunc(w, func(s string) bool { return strings.HasPrefix(s, "http") })]; {
			case strings.HasSuffix(u, "/readyz"):
				if got.Ready == nil || !*got.Ready {
					t.Errorf("%s: not ready: %s", c, body)
				}
				continue
			case strings.HasSuffix(u, "/v1/chat/completions") && got.Object == "chat.completion",
				strings.HasSuffix(u, "/v1/messages") && got.Type == "message",
				strings.HasSuffix(u, "/v1/responses") && got.Object == "response":
			default:
				t.Errorf("%s: not the answer of its API: %s", c, body)
			}
			if vars["KEY"] != "" && (slices.Contains(w, "Authorization: Bearer "+vars["KEY"]) || slices.Contains(w, "x-api-key: "+vars["KEY"])) {
				answered++
			}
		default:
			t.Fatalf("the test does not know the quick start's command %q", c)
		}
	}
	if answered != 3 || !strings.HasPrefix(vars["KEY"], keyPrefix) {
		t.Fatalf("%d keyed requests answered, key %q", answered, vars["KEY"])
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// configArg replaces the README's fencegate.yaml with the test's file.
func configArg(args []string, path string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == "fencegate.yaml" {
			out[i] = path
		}
	}
	return out
}
