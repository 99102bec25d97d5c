package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/trace"
)

// startSim starts a simulated replica; its name salts its answers, so two replicas of one
// name answer alike and replicas of different names do not.
func startSim(t *testing.T, name string) *sim.Server {
	t.Helper()
	s, err := sim.Start(sim.Config{Name: name, Model: "sim-model"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tracingGateway is a gateway keeping every request's trace, in front of replica s; it
// returns the URLs of its public and its (loopback) admin listener.
func tracingGateway(t *testing.T, s *sim.Server) (url, admin string) {
	t.Helper()
	cfg := &config.Config{Models: []config.Model{{Name: "sim-model", Replicas: []config.Replica{{Name: s.Name(), URL: s.URL()}}}},
		Store: "memory:", Traces: config.Traces{Mode: config.TracesAll}, AdminListen: "127.0.0.1:0"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	srv := h1servertest.NewServer(gw.Handler())
	adminSrv := h1servertest.NewServer(gw.AdminHandler())
	t.Cleanup(func() {
		srv.Close()
		adminSrv.Close()
		gw.Close()
	})
	return srv.URL, adminSrv.URL
}

// traceFile sends body through the gateway at url with header, and writes the request's
// trace (read from the loopback admin listener at admin, open without a key) into a file.
func traceFile(t *testing.T, url, admin, body string, header http.Header) (path string, received []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	received, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	tr, err := http.Get(admin + "/admin/requests/" + id + "/trace?wait=20s")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(tr.Body)
	tr.Body.Close()
	if tr.StatusCode != http.StatusOK {
		t.Fatalf("trace of %s: %d %s", id, tr.StatusCode, b)
	}
	path = filepath.Join(t.TempDir(), id+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, received
}

// runReplay runs `fencegate replay` and returns its output and exit status.
func runReplay(t *testing.T, args ...string) (stdout string, status int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"replay"}, args...), &out, &errOut)
	var st *exitStatus
	switch {
	case err == nil:
	case errors.As(err, &st):
		status = st.code
	default:
		t.Fatalf("replay %v: %v (no exit status)", args, err)
	}
	return out.String() + errOut.String(), status
}

const replayBody = `{"model":"sim-model","stream":true,"max_tokens":8,"seed":7,"ignore_eos":true,"messages":[{"role":"user","content":"replay me"}]}`

// A request interrupted by a replica reset after its third token: its trace keeps the
// fault header (not a secret), so the replay meets the same fault at the same point on a
// fresh replica and says so; a replica that says something else diverges (exit status 1).
func TestReplayReproducesAFaultAtItsPoint(t *testing.T) {
	url, admin := tracingGateway(t, startSim(t, "sim-a"))
	path, received := traceFile(t, url, admin, replayBody, http.Header{"X-Sim-Fault": {"reset@sent:2"}})
	if !bytes.Contains(received, []byte("upstream_decode_interrupted")) || !bytes.Contains(received, []byte(`"content"`)) {
		t.Fatalf("the client did not get part of an answer and an interruption:\n%s", received)
	}

	fresh := startSim(t, "sim-a")
	out, status := runReplay(t, path, "--url", fresh.URL())
	if status != 0 || !strings.Contains(out, "verdict: same_point") {
		t.Fatalf("replay against the same replica: status %d\n%s", status, out)
	}
	if recs := fresh.Records(); len(recs) != 1 || recs[0].Fault != "reset@sent:2" || recs[0].Outcome != sim.OutcomeReset {
		t.Fatalf("the fresh replica saw %+v, want one request meeting the traced fault", recs)
	}

	out, status = runReplay(t, "--json", "--url", startSim(t, "sim-b").URL(), path)
	var c trace.Comparison
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &c); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if status != 1 || c.Verdict != trace.Diverges || c.Agrees() {
		t.Fatalf("replay against a replica with other answers: status %d, %+v", status, c)
	}
}

// A complete answer replays identically on the same replica, and diverges on another.
func TestReplayOfACompleteAnswer(t *testing.T) {
	url, admin := tracingGateway(t, startSim(t, "sim-a"))
	path, _ := traceFile(t, url, admin, replayBody, http.Header{})
	if out, status := runReplay(t, path, "--url", startSim(t, "sim-a").URL()); status != 0 || !strings.Contains(out, "verdict: identical") {
		t.Fatalf("status %d\n%s", status, out)
	}
	out, status := runReplay(t, path, "--url", startSim(t, "sim-b").URL()+"/")
	if status != 1 || !strings.Contains(out, "verdict: diverges") || !strings.Contains(out, "choice 0, byte ") {
		t.Fatalf("status %d\n%s", status, out)
	}
}

// Usage and file errors: exit status 2 and a message that says what is wrong.
func TestReplayUsageErrors(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "notjson.json")
	os.WriteFile(notJSON, []byte("hello"), 0o600)
	otherJSON := filepath.Join(dir, "other.json")
	os.WriteFile(otherJSON, []byte(`{"format":"something/1"}`), 0o600)
	// Without --url the replica comes from the trace, which must name one that takes a
	// request without the gateway's lease.
	writeDoc := func(name string, attempts []trace.Attempt) string {
		b, _ := json.Marshal(trace.Document{Format: trace.Format, RequestID: "req_x", Source: "gateway",
			Request: trace.Request{Method: http.MethodPost, Path: "/v1/chat/completions", Body: json.RawMessage(replayBody)}, Attempts: attempts})
		path := filepath.Join(dir, name)
		os.WriteFile(path, b, 0o600)
		return path
	}
	noAttempt := writeDoc("noattempt.json", nil)
	fenced := writeDoc("fenced.json", []trace.Attempt{{ID: "req_x.a1", N: 1, Replica: "r1", URL: "http://127.0.0.1:1", LeaseEpoch: 3}})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "http://127.0.0.1:1"}, "want one trace file"},
		{[]string{filepath.Join(dir, "missing.json"), "--url", "http://127.0.0.1:1"}, "read trace"},
		{[]string{notJSON, "--url", "http://127.0.0.1:1"}, "is not a trace document"},
		{[]string{otherJSON, "--url", "http://127.0.0.1:1"}, `format "something/1"`},
		{[]string{noAttempt}, "records no attempt"},
		{[]string{fenced}, "reached through an agent"},
		{[]string{notJSON, "--url", "127.0.0.1:1"}, "not an http:// or https:// URL"},
		{[]string{notJSON, "--url", "http://127.0.0.1:1", "--header", "no colon"}, "is not 'Name: value'"},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"replay"}, c.args...), &out, &errOut)
		if code := exitCode(err, io.Discard); code != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("replay %v: %v (exit status %d), want exit status 2 and %q", c.args, err, code, c.want)
		}
	}
}

// A request whose engine runs tools itself is not resent by default: its engine would run
// them again. --rerun-engine-tools resends it; the counting tool server then sees a second
// call.
func TestReplayRefusesEngineRunTools(t *testing.T) {
	ts, err := sim.StartToolServer("tickets")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	s, err := sim.Start(sim.Config{Name: "tools", Model: "sim-model", ToolServers: []string{ts.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	doc := trace.Document{Format: trace.Format, RequestID: "req_x", Source: "gateway",
		Request: trace.Request{Method: http.MethodPost, Path: "/v1/responses",
			Body: json.RawMessage(`{"model":"sim-model","input":"open a ticket","max_output_tokens":4,"tools":[{"type":"mcp","server_label":"tickets"}]}`)},
		Attempts: []trace.Attempt{{ID: "req_x.a1", N: 1, Replica: "tools", EngineMayHaveActed: true}}}
	b, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), "trace.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"replay", path, "--url", s.URL()}, &out, &errOut)
	var st *exitStatus
	if !errors.As(err, &st) || st.code != 2 || !strings.Contains(err.Error(), "engine run tools itself (mcp)") || !strings.Contains(err.Error(), "--rerun-engine-tools") {
		t.Fatalf("replay: %v", err)
	}
	if n := ts.Count("create_ticket"); n != 0 {
		t.Fatalf("the refused replay ran the tool %d times", n)
	}
	if _, status := runReplay(t, path, "--url", s.URL(), "--rerun-engine-tools"); status == 2 {
		t.Fatalf("the replay with --rerun-engine-tools was refused")
	}
	if n := ts.Count("create_ticket"); n != 1 {
		t.Fatalf("the tool ran %d times on the replay", n)
	}
}
