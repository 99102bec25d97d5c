package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// keysFixture is a configuration with an SQLite store and one simulated replica.
func keysFixture(t *testing.T, extra string) (path, db string) {
	t.Helper()
	s, err := sim.Start(sim.Config{Model: "sim-model"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	dir := t.TempDir()
	db = filepath.Join(dir, "fencegate.db")
	path = filepath.Join(dir, "fencegate.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nstore: \"sqlite:%s\"\nmodels:\n  - name: sim-model\n    replicas: [{url: %q}]\n%s", db, s.URL(), extra)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, db
}

func runKeys(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"keys"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

var keyShape = regexp.MustCompile(`^fg-[A-Za-z0-9_-]{43}$`)

// create prints a long random key once and stores only its hash; list shows ids, models,
// limits, trace modes and times, never a key; revoke marks the key; ids are never reused.
func TestKeysCreateListRevoke(t *testing.T) {
	path, db := keysFixture(t, "auth:\n  keys: [{id: cfg-key, key_sha256: \""+strings.Repeat("ab", 32)+"\", rpm: 7, traces: errors}]\n")
	out, _, err := runKeys(t, "create", "--id", "team-a", "--models", "sim-model", "--rpm", "60", "--tpm", "1000", "--max-concurrent", "2", "--traces", "all",
		"--weight", "3", "--priority", "-5", "--fairness-header", "--priority-header", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(out)
	if !keyShape.MatchString(secret) {
		t.Fatalf("create printed %q, want fg- and 32 random bytes in base64url", out)
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(db + "-wal")
	if bytes.Contains(append(b, wal...), []byte(secret)) || bytes.Contains(append(b, wal...), []byte(secret[3:])) {
		t.Fatal("the store holds the key itself")
	}
	out2, _, err := runKeys(t, "create", "--id", "team-b", "--config", path)
	if err != nil || strings.TrimSpace(out2) == secret {
		t.Fatalf("second create: %q %v", out2, err)
	}
	for _, bad := range [][]string{
		{"create", "--id", "team-a", "--config", path},  // taken
		{"create", "--id", "cfg-key", "--config", path}, // a configured key's id
		{"create", "--id", "bad id!", "--config", path}, // not an id
		{"create", "--id", "x", "--rpm", "-1", "--config", path},
		{"create", "--id", "x", "--traces", "verbose", "--config", path},
		{"create", "--id", "x", "--weight", "0", "--config", path},
		{"create", "--id", "x", "--priority", "101", "--config", path},
		{"create", "--id", "x", "--admin", "--weight", "2", "--config", path},
		{"revoke", "--id", "nobody", "--config", path},
		{"revoke", "--id", "cfg-key", "--config", path},
		{"create", "--id", "x"}, // no --config
		{"rotate", "--config", path},
	} {
		if _, _, err := runKeys(t, bad...); err == nil {
			t.Errorf("keys %q succeeded", bad)
		}
	}
	if _, msg, err := runKeys(t, "revoke", "--id", "team-b", "--config", path); err != nil || !strings.Contains(msg, "revoked") {
		t.Fatalf("revoke: %q %v", msg, err)
	}
	if _, _, err := runKeys(t, "create", "--id", "team-b", "--config", path); err == nil {
		t.Error("a revoked key's id was reused")
	}
	list, _, err := runKeys(t, "list", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(list, secret[3:]) {
		t.Fatalf("list shows a key:\n%s", list)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 4 {
		t.Fatalf("list:\n%s", list)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^ID\s+SOURCE\s+MODELS\s+MAX_CONCURRENT\s+RPM\s+TPM\s+TRACES\s+WEIGHT\s+CLASS\s+HEADERS\s+CREATED\s+REVOKED$`),
		regexp.MustCompile(`^cfg-key\s+config\s+\*\s+-\s+7\s+-\s+errors\s+1\s+0\s+-\s+-\s+-$`),
		regexp.MustCompile(`^team-a\s+store\s+sim-model\s+2\s+60\s+1000\s+all\s+3\s+-5\s+fairness,priority\s+\d{4}-\d\d-\d\dT\S+Z\s+-$`),
		regexp.MustCompile(`^team-b\s+store\s+\*\s+-\s+-\s+-\s+-\s+1\s+0\s+-\s+\S+Z\s+\d{4}-\d\d-\d\dT\S+Z$`),
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("list line %d %q does not match %s", i, lines[i], re)
		}
	}
}

// create --traces stores the key's trace mode (any case), which list shows; a bad mode is
// refused with an error that names the modes, and nothing is stored.
func TestKeysCreateTraces(t *testing.T) {
	path, _ := keysFixture(t, "")
	for id, mode := range map[string]string{"quiet": "off", "failures": "Errors", "everything": "all"} {
		if _, _, err := runKeys(t, "create", "--id", id, "--traces", mode, "--config", path); err != nil {
			t.Fatalf("create --traces %s: %v", mode, err)
		}
	}
	for _, bad := range []string{"verbose", "true", "none"} {
		out, _, err := runKeys(t, "create", "--id", "bad-"+bad, "--traces", bad, "--config", path)
		if err == nil || !strings.Contains(err.Error(), "--traces") || !strings.Contains(err.Error(), "off, errors or all") || out != "" {
			t.Errorf("create --traces %s: %q %v, want an error naming the modes and no key", bad, out, err)
		}
	}
	list, _, err := runKeys(t, "list", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(list, "bad-") {
		t.Errorf("a key with a bad --traces was stored:\n%s", list)
	}
	for id, mode := range map[string]string{"quiet": "off", "failures": "errors", "everything": "all"} {
		re := regexp.MustCompile(`(?m)^` + id + `\s+store\s+\*\s+-\s+-\s+-\s+` + mode + `\s+1\s+0\s+-\s+\S+Z\s+-$`)
		if !re.MatchString(list) {
			t.Errorf("list does not show %s with traces %s:\n%s", id, mode, list)
		}
	}
}

// serve with admin_listen: the public listener serves the API and /healthz only; the admin
// listener (loopback, so without a key) serves metrics, readiness, admin calls and pprof. A
// key created with `fencegate keys` while the gateway runs works at once.
func TestServeAdminListenerAndStoredKeys(t *testing.T) {
	path, _ := keysFixture(t, "admin_listen: 127.0.0.1:0\nauth:\n  keys: [{id: cfg-key, key: \"a-configured-key-0123\"}]\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var public, admin string
	for (public == "" || admin == "") && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate gateway listening on "); ok {
			public = u
		}
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate admin listening on "); ok {
			admin = u
		}
	}
	if public == "" || admin == "" {
		cancel()
		t.Fatalf("serve did not say where it listens: %v", <-done)
	}
	go io.Copy(io.Discard, pr)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	call := func(method, url, key string) int {
		t.Helper()
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
		}
		req, _ := http.NewRequest(method, url, body)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for url, want := range map[string]int{
		public + "/healthz":      200,
		public + "/metrics":      404,
		public + "/readyz":       404,
		public + "/debug/pprof/": 404,
		admin + "/metrics":       200,
		admin + "/readyz":        200,
		admin + "/healthz":       200,
		admin + "/debug/pprof/":  200,
		admin + "/v1/models":     404,
		public + "/v1/models":    401,
	} {
		if got := call("GET", url, ""); got != want {
			t.Errorf("GET %s: %d, want %d", url, got, want)
		}
	}
	if got := call("POST", public+"/admin/refresh", ""); got != 404 {
		t.Errorf("POST /admin/refresh on the public listener: %d, want 404", got)
	}
	if got := call("POST", admin+"/admin/refresh", ""); got != 200 {
		t.Errorf("POST /admin/refresh on the loopback admin listener, no key: %d, want 200", got)
	}
	out, _, err := runKeys(t, "create", "--id", "team-a", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if got := call("POST", public+"/v1/chat/completions", strings.TrimSpace(out)); got != 200 {
		t.Errorf("a key created while the gateway runs: %d, want 200", got)
	}
	if got := call("POST", public+"/v1/chat/completions", "a-configured-key-0123"); got != 200 {
		t.Errorf("the configured key: %d, want 200", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve ended with %v", err)
	}
}

// serve applies the server section: a header block over max_header_bytes is refused (431),
// and a client that never finishes its headers is cut at read_header_timeout.
func TestServeServerBounds(t *testing.T) {
	path, _ := keysFixture(t, "server: {max_header_bytes: 4096, read_header_timeout: 300ms}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var public string
	for public == "" && sc.Scan() {
		public, _ = strings.CutPrefix(sc.Text(), "fencegate gateway listening on ")
	}
	if public == "" {
		cancel()
		t.Fatalf("serve did not say where it listens: %v", <-done)
	}
	go io.Copy(io.Discard, pr)
	addr := strings.TrimPrefix(public, "http://")

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 16<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers: %v %v, want 431", resp, err)
	}
	c.Close()

	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("headers that never end: %v, want the connection closed", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("closed after %s, want about read_header_timeout", waited)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve ended with %v", err)
	}
}

// create --admin stores an admin key, which list marks as one; an admin key has no models,
// limits or trace mode of its own, and asking for them is refused with nothing stored.
func TestKeysCreateAdmin(t *testing.T) {
	path, _ := keysFixture(t, "")
	out, errOut, err := runKeys(t, "create", "--id", "ops", "--admin", "--config", path)
	if err != nil || !keyShape.MatchString(strings.TrimSpace(out)) || !strings.Contains(errOut, "admin key") {
		t.Fatalf("create --admin: %q %q %v", out, errOut, err)
	}
	for _, extra := range [][]string{{"--models", "sim-model"}, {"--rpm", "5"}, {"--traces", "all"}} {
		args := append([]string{"create", "--id", "ops-" + strings.TrimPrefix(extra[0], "--"), "--admin"}, extra...)
		out, _, err := runKeys(t, append(args, "--config", path)...)
		if err == nil || !strings.Contains(err.Error(), "--admin") || out != "" {
			t.Errorf("create --admin %v: %q %v, want a refusal and no key", extra, out, err)
		}
	}
	if _, _, err := runKeys(t, "create", "--id", "team-a", "--config", path); err != nil {
		t.Fatal(err)
	}
	list, _, err := runKeys(t, "list", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ops\s+store \(admin\)\s+\*`).MatchString(list) || !regexp.MustCompile(`(?m)^team-a\s+store\s+\*`).MatchString(list) {
		t.Errorf("list does not tell the admin key from the tenant key:\n%s", list)
	}
	if strings.Contains(list, "ops-") {
		t.Errorf("a refused admin key was stored:\n%s", list)
	}
}
