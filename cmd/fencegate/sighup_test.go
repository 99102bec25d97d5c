package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// SIGHUP reloads the configuration file while a stream is in flight: the stream completes
// on the replica it started on, new requests go to the replica the new file names, and a
// file that does not validate is refused with the reason logged, the gateway still serving.
func TestSIGHUPReloads(t *testing.T) {
	old, err := sim.Start(sim.Config{Name: "old", DecodePerToken: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	repl, err := sim.Start(sim.Config{Name: "new"})
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close()
	yaml := func(s *sim.Server) string {
		return fmt.Sprintf("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nstore: \"memory:\"\nmodels:\n  - name: sim-model\n    replicas: [{url: %q, name: %s}]\n", s.URL(), s.Name())
	}
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(yaml(old)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"=serve\n--config\n"+path)
	out, _ := cmd.StdoutPipe()
	logs, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	url, admin := "", ""
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate gateway listening on "); ok {
			url = u
		}
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate admin listening on "); ok {
			admin = u
		}
		if url != "" && admin != "" {
			break
		}
	}
	if url == "" || admin == "" {
		t.Fatal("the gateway never said where it listens")
	}
	go io.Copy(io.Discard, out)
	logLines := make(chan string, 64)
	go func() {
		ls := bufio.NewScanner(logs)
		for ls.Scan() {
			logLines <- ls.Text()
		}
		close(logLines)
	}()
	waitLog := func(want string) string {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-logLines:
				if !ok {
					t.Fatalf("the gateway exited before logging %q", want)
				}
				if strings.Contains(l, want) {
					return l
				}
			case <-timeout:
				t.Fatalf("no log line with %q", want)
			}
		}
	}
	post := func(body string) (int, string) {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	done := make(chan string, 1)
	go func() {
		_, body := post(`{"model":"sim-model","stream":true,"max_tokens":30,"messages":[{"role":"user","content":"a long one"}]}`)
		done <- body
	}()
	if _, err := old.WaitRecord(t.Context(), func(r sim.Record) bool { return r.TokensSent > 0 }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(yaml(repl)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(`"msg":"configuration reloaded"`)
	if body := <-done; !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("the stream in flight during the reload: %q", body)
	}
	resp, err := http.Post(admin+"/admin/refresh", "application/json", nil) // the new replica's first probe
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if status, body := post(`{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"next"}]}`); status != 200 || len(repl.Records()) != 1 {
		t.Fatalf("after the reload: %d %s (new replica records %d)", status, body, len(repl.Records()))
	}

	if err := os.WriteFile(path, []byte("models: [{name: m, replicas: [{url: nope}]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	if l := waitLog("configuration not reloaded"); !strings.Contains(l, "models[0].replicas[0].url") {
		t.Fatalf("the refusal does not name the field: %s", l)
	}
	if status, _ := post(`{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"still"}]}`); status != 200 {
		t.Fatalf("after a refused reload: %d", status)
	}
}
