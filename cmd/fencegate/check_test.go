package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkFixture is a directory holding a valid configuration's files.
type checkFixture struct {
	dir, secret, cert, key, db, engineKey string
}

func newCheckFixture(t *testing.T) checkFixture {
	dir := t.TempDir()
	f := checkFixture{dir: dir, secret: filepath.Join(dir, "agent.secret"), cert: filepath.Join(dir, "tls.crt"),
		key: filepath.Join(dir, "tls.key"), db: filepath.Join(dir, "data", "fencegate.db"), engineKey: filepath.Join(dir, "engine.key")}
	if err := os.WriteFile(f.secret, []byte("a-shared-agent-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.engineKey, []byte("an-engine-api-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Dir(f.db), 0o700); err != nil {
		t.Fatal(err)
	}
	newTestCert(t, "check").write(t, f.cert, f.key)
	return f
}

// config writes a configuration listening on listen, with extra appended, and returns its path.
func (f checkFixture) config(t *testing.T, listen, extra string) string {
	t.Helper()
	yaml := fmt.Sprintf(`listen: %s
store: "sqlite:%s"
agent_secret_file: %q
tls: {cert_file: %q, key_file: %q}
models:
  - name: m
    api_key_file: %q
    replicas:
      - {url: "http://10.0.0.1:8001", agent: true}
      - {url: "http://10.0.0.2:8001", agent: true}
%s`, listen, f.db, f.secret, f.cert, f.key, f.engineKey, extra)
	path := filepath.Join(f.dir, "fencegate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckAcceptsAGoodConfigAndStartsNothing(t *testing.T) {
	f := newCheckFixture(t)
	// The configured address is taken: check must not try to listen on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	path := f.config(t, ln.Addr().String(), "")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"check", "--config", path}, &out, &out); err != nil {
		t.Fatalf("check: %v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	if lines[0] != "ok: 1 models, 2 replicas" || !strings.HasPrefix(lines[1], "tls: certificate valid until ") {
		t.Fatalf("check printed %q", out.String())
	}
	// Nor may it open the store, which would create the database.
	if _, err := os.Stat(f.db); !os.IsNotExist(err) {
		t.Fatalf("check created the store: %v", err)
	}
}

func TestCheckRejectsBadConfigsNamingTheField(t *testing.T) {
	f := newCheckFixture(t)
	good := f.config(t, "127.0.0.1:8080", "")
	goodYAML, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string { return strings.Replace(string(goodYAML), old, new, 1) }
	empty := filepath.Join(f.dir, "empty.secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	three := filepath.Join(f.dir, "three.secret")
	if err := os.WriteFile(three, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, yaml, want string }{
		{"unknown field", string(goodYAML) + "trace: true\n", "trace"},
		{"bad url", edit("http://10.0.0.2:8001", "10.0.0.2:8001"), "models[0].replicas[1].url"},
		{"bad duration", string(goodYAML) + "policy: {idle_timeout: soon}\n", "policy.idle_timeout"},
		{"missing secret file", edit(f.secret, filepath.Join(f.dir, "nope.secret")), "agent_secret_file"},
		{"empty secret file", edit(f.secret, empty), "agent_secret_file: " + empty + " holds no secret"},
		{"three secrets", edit(f.secret, three), "holds 3 secrets; at most 2, one per line"},
		{"missing tls key", edit(f.key, filepath.Join(f.dir, "nope.key")), "tls.key_file"},
		{"tls cert without key", edit(fmt.Sprintf(", key_file: %q", f.key), ""), "tls.key_file"},
		{"missing sqlite directory", edit(f.db, filepath.Join(f.dir, "nodir", "fencegate.db")), "store"},
		{"bad store", edit("sqlite:"+f.db, "mysql://x"), "store"},
		{"missing engine key file", edit("agent: true}\n      - {url", "agent: true, api_key_file: /nonexistent/key}\n      - {url"), "models[0].replicas[0].api_key_file"},
		{"missing model engine key file", edit(f.engineKey, filepath.Join(f.dir, "nope.key")), "models[0].api_key_file"},
		{"unset engine key variable", edit(fmt.Sprintf("api_key_file: %q", f.engineKey), "api_key_env: FENCEGATE_TEST_UNSET_ENGINE_KEY"), "models[0].api_key_env"},
	}
	for _, tc := range cases {
		path := filepath.Join(f.dir, "bad.yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := run(context.Background(), []string{"check", "--config", path}, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v does not name %q", tc.name, err, tc.want)
		}
		if strings.Contains(out.String(), "ok:") {
			t.Errorf("%s: check printed %q", tc.name, out.String())
		}
	}
	if err := run(context.Background(), []string{"check"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("check without --config must fail")
	}
	if err := run(context.Background(), []string{"check", "--config", filepath.Join(f.dir, "absent.yaml")}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("check of a missing file must fail")
	}
}

// FENCEGATE_STORE replaces the configured store for check as for serve, and a bad value is
// reported without echoing it (it may hold a password).
func TestCheckUsesTheStoreFromTheEnvironment(t *testing.T) {
	f := newCheckFixture(t)
	path := f.config(t, "127.0.0.1:8080", "")
	t.Setenv(storeEnv, "sqlite:"+filepath.Join(f.dir, "nodir", "x.db"))
	err := run(context.Background(), []string{"check", "--config", path}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "nodir") {
		t.Fatalf("check with %s in a missing directory: %v", storeEnv, err)
	}
	t.Setenv(storeEnv, "mysql://user:hunter2@db/x")
	err = run(context.Background(), []string{"check", "--config", path}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), storeEnv) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("check with a bad %s: %v", storeEnv, err)
	}
	t.Setenv(storeEnv, "postgres://fencegate:hunter2@db:5432/fencegate")
	cfg, err := loadConfig(path)
	if err != nil || cfg.Store != "postgres://fencegate:hunter2@db:5432/fencegate" {
		t.Fatalf("store %q, %v", cfg.Store, err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"check", "--config", path}, &out, &out); err != nil || !strings.HasPrefix(out.String(), "ok: ") {
		t.Fatalf("check with a postgres %s: %v %q", storeEnv, err, out.String())
	}
}

// The process exits non-zero and says why on stderr, which is what a pipeline sees.
func TestCheckExitStatus(t *testing.T) {
	f := newCheckFixture(t)
	path := f.config(t, "127.0.0.1:8080", "bogus: 1\n")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"=check\n--config\n"+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("check of a bad file exited with %v", err)
	}
	if !strings.Contains(stderr.String(), "bogus") {
		t.Fatalf("stderr %q does not name the field", stderr.String())
	}
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"=check\n--config\n"+f.config(t, "127.0.0.1:8080", ""))
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "ok: 1 models, 2 replicas\n") {
		t.Fatalf("check of a good file: %v %q", err, out)
	}
}

// check says how the operator's calls are reached: off without an admin key or a loopback
// admin listener, behind an admin key on a shared listener, or on the admin listener.
func TestCheckSaysWhoReachesTheAdminCalls(t *testing.T) {
	f := newCheckFixture(t)
	for extra, want := range map[string]string{
		"": "admin calls: off (403 admin_disabled)",
		"auth:\n  admin_keys: [{id: ops, key_sha256: \"" + strings.Repeat("ab", 32) + "\"}]\n": "admin calls: on the one listener, with an admin key",
		"admin_listen: 127.0.0.1:9090\n": "admin calls: on the admin listener 127.0.0.1:9090 only, open to this host",
	} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"check", "--config", f.config(t, "127.0.0.1:8080", extra)}, &out, &out); err != nil {
			t.Fatalf("check with %q: %v", extra, err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("check with %q says:\n%s\nwant a line with %q", extra, out.String(), want)
		}
	}
}

// check warns, before deployment, of a gateway that could serve nothing while its PostgreSQL
// store is away (no configured key, the store's keys counting), and not otherwise.
func TestCheckSaysWhatAStoreOutageDoes(t *testing.T) {
	f := newCheckFixture(t)
	const note = "note: started while the store is unreachable, this gateway answers every API request 503"
	t.Setenv(storeEnv, "postgres://fencegate@db.example:5432/fencegate")
	for extra, want := range map[string]bool{
		"":                            true,
		"auth: {store_keys: false}\n": false,
		"auth:\n  keys: [{id: a, key_sha256: \"" + strings.Repeat("cd", 32) + "\"}]\n": false,
	} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"check", "--config", f.config(t, "127.0.0.1:8080", extra)}, &out, &out); err != nil {
			t.Fatalf("check with %q: %v", extra, err)
		}
		if strings.Contains(out.String(), note) != want {
			t.Errorf("check with %q says:\n%s\nthe note wanted: %v", extra, out.String(), want)
		}
	}
}
