package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/pgtest"
	"github.com/fencegate/fencegate/internal/trace"
)

// The keys of the trace tests: a client key, and an admin key that reads traces.
const (
	traceClientKey = "client-key-0123456789"
	traceAdminKey  = "admin-key-0123456789"
)

// traceKeys also serves everything on one listener, where traces need the admin key.
func traceKeys(c *config.Config, keys ...config.APIKey) {
	c.AdminListen = ""
	c.Auth.Keys = append([]config.APIKey{{ID: "client", Key: traceClientKey}}, keys...)
	c.Auth.AdminKeys = []config.APIKey{{ID: "ops", Key: traceAdminKey}}
}

// getTrace asks for the trace of id with key (none when empty), waiting for the request
// to end.
func getTrace(t *testing.T, e *env, id, key string) (*http.Response, []byte) {
	t.Helper()
	return getTraceURL(t, e.operatorURL()+"/admin/requests/"+id+"/trace?wait=20s", key)
}

func getTraceURL(t *testing.T, url, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// traceOf reads the trace document of id, which must exist.
func traceOf(t *testing.T, e *env, id string) (trace.Document, []byte) {
	t.Helper()
	resp, b := getTrace(t, e, id, traceAdminKey)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("trace of %s: %d %s %s", id, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var doc trace.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("trace of %s is not a document: %v\n%s", id, err, b)
	}
	return doc, b
}

// statusAndCode returns the status and error code of an answer.
func statusAndCode(resp *http.Response, b []byte) (int, string) {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(b, &env)
	return resp.StatusCode, env.Error.Code
}

const traceBody = `{"model":"sim-model","stream":true,"max_tokens":6,"seed":42,"temperature":0.7,"ignore_eos":true,"messages":[{"role":"user","content":"trace this"}]}`

// A request whose first attempt is reset before any output and rerun on another replica:
// its trace names both attempts, holds the request without its credentials, and what the
// client received is exactly the bytes the client read.
func TestTraceOfARerunRequest(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Models[0].Replicas[1].Priority = 1 // sim-1 serves first
		c.Traces = config.Traces{Mode: config.TracesAll}
		traceKeys(c)
	}})
	resp, got := postAPI(t, e.srv.URL+"/v1/chat/completions", traceBody,
		"Authorization", "Bearer "+traceClientKey, "Cookie", "session=cookie-secret",
		"X-Sim-Fault", "reset@prefill;on=sim-1", "X-Client-Note", "kept")
	if resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte("data: [DONE]")) {
		t.Fatalf("answer %d %s", resp.StatusCode, got)
	}
	id := resp.Header.Get("X-Request-Id")
	doc, raw := traceOf(t, e, id)

	if doc.Format != trace.Format || doc.RequestID != id || doc.Source != "gateway" {
		t.Fatalf("document %s/%s/%s", doc.Format, doc.RequestID, doc.Source)
	}
	if len(doc.Attempts) != 2 || doc.Attempts[0].Replica != "sim-1" || doc.Attempts[1].Replica != "sim-2" {
		t.Fatalf("attempts %+v, want sim-1 then sim-2", doc.Attempts)
	}
	first, second := doc.Attempts[0], doc.Attempts[1]
	if first.Failure != "dead" || first.EndReason == "" || first.EndedAt.IsZero() || first.StartedAt.IsZero() ||
		second.Failure != "" || second.EndedAt.IsZero() || second.StartedAt.Before(first.EndedAt) || first.N != 1 || second.N != 2 {
		t.Fatalf("attempts %+v", doc.Attempts)
	}
	if first.URL != e.sims[0].URL() || second.URL != e.sims[1].URL() {
		t.Fatalf("attempt urls %s, %s", first.URL, second.URL)
	}

	// The request as received, credentials removed.
	var sent, kept any
	json.Unmarshal([]byte(traceBody), &sent)
	json.Unmarshal(doc.Request.Body, &kept)
	if doc.Request.Method != http.MethodPost || doc.Request.Path != "/v1/chat/completions" || !jsonEqual(sent, kept) {
		t.Fatalf("request %s %s %s", doc.Request.Method, doc.Request.Path, doc.Request.Body)
	}
	if string(doc.Request.Sampling["seed"]) != "42" || string(doc.Request.Sampling["temperature"]) != "0.7" {
		t.Fatalf("sampling %s", doc.Request.Sampling)
	}
	h := doc.Request.Headers
	if h.Get("X-Sim-Fault") != "reset@prefill;on=sim-1" || h.Get("X-Client-Note") != "kept" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", h)
	}
	for _, secret := range []string{traceClientKey, "cookie-secret"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("the trace holds the credential %q:\n%s", secret, raw)
		}
	}
	if h.Get("Authorization") != "" || h.Get("Cookie") != "" {
		t.Fatalf("credential headers kept: %v", h)
	}

	// What the client received: the same bytes, event by event.
	r := doc.Received
	var joined strings.Builder
	for _, c := range r.Chunks {
		if !c.Kept() {
			t.Fatalf("chunk kept as a hash under the default limit: %+v", c)
		}
		joined.WriteString(c.Text)
	}
	sum := sha256.Sum256(got)
	if joined.String() != string(got) || r.Bytes != len(got) || r.SHA256 != hex.EncodeToString(sum[:]) ||
		r.Status != http.StatusOK || r.ContentType != "text/event-stream" {
		t.Fatalf("received %d bytes (%s, %d %s), the client read %d:\n%q\nvs\n%q",
			r.Bytes, r.SHA256, r.Status, r.ContentType, len(got), joined.String(), got)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/requests/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+traceClientKey)
	jr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rec requestRecord
	json.NewDecoder(jr.Body).Decode(&rec)
	jr.Body.Close()
	if doc.Outcome.Outcome != "completed" || doc.Outcome.DeliveredOutputTokens != rec.DeliveredOutputTokens ||
		doc.Outcome.DeliveredOutputTokens == 0 || doc.Outcome.FirstDeltaAt.IsZero() || len(doc.Outcome.Error) != 0 {
		t.Fatalf("outcome %+v, journal %+v", doc.Outcome, rec)
	}
	if tr := trace.Read(doc.Request.Path, r); tr.End != trace.EndComplete {
		t.Fatalf("the recorded answer reads as %s", tr.End)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Which requests keep a trace: none with mode off, those that did not complete with mode
// errors, all with mode all; a key's own traces: wins over the gateway's mode.
func TestTraceModes(t *testing.T) {
	const (
		body        = `{"model":"sim-model","stream":true,"max_tokens":6,"ignore_eos":true,"messages":[{"role":"user","content":"modes"}]}`
		interrupted = "reset@sent:2"
	)
	for _, c := range []struct {
		mode                         config.TraceMode
		keepsDone, keepsFailed       bool
		override                     config.TraceMode // the key "own"'s traces:
		ownKeepsDone, ownKeepsFailed bool
	}{
		{mode: config.TracesOff, override: config.TracesAll, ownKeepsDone: true, ownKeepsFailed: true},
		{mode: config.TracesErrors, keepsFailed: true, override: config.TracesOff},
		{mode: config.TracesAll, keepsDone: true, keepsFailed: true, override: config.TracesErrors, ownKeepsFailed: true},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			e := newEnv(t, envOptions{replicas: 1, config: func(cfg *config.Config) {
				cfg.Traces = config.Traces{Mode: c.mode}
				traceKeys(cfg, config.APIKey{ID: "own", Key: "own-key-0123456789", Traces: c.override})
			}})
			for _, k := range []struct {
				key                    string
				keepsDone, keepsFailed bool
			}{
				{traceClientKey, c.keepsDone, c.keepsFailed},
				{"own-key-0123456789", c.ownKeepsDone, c.ownKeepsFailed},
			} {
				done, _ := postAPI(t, e.srv.URL+"/v1/chat/completions", body, "Authorization", "Bearer "+k.key)
				failed, got := postAPI(t, e.srv.URL+"/v1/chat/completions", body, "Authorization", "Bearer "+k.key, "X-Sim-Fault", interrupted)
				if !bytes.Contains(got, []byte("upstream_decode_interrupted")) {
					t.Fatalf("the faulted request was not interrupted: %s", got)
				}
				for _, r := range []struct {
					id      string
					keeps   bool
					outcome string
				}{
					{done.Header.Get("X-Request-Id"), k.keepsDone, "completed"},
					{failed.Header.Get("X-Request-Id"), k.keepsFailed, "interrupted"},
				} {
					resp, b := getTrace(t, e, r.id, traceAdminKey)
					if !r.keeps {
						if status, code := statusAndCode(resp, b); status != http.StatusNotFound || code != "trace_not_found" {
							t.Errorf("key %s, %s request: %d %s, want 404 trace_not_found: %s", k.key, r.outcome, status, code, b)
						}
						continue
					}
					doc, _ := traceOf(t, e, r.id)
					if doc.Outcome.Outcome != r.outcome {
						t.Errorf("key %s: trace outcome %q, want %q", k.key, doc.Outcome.Outcome, r.outcome)
					}
					if r.outcome == "interrupted" && (len(doc.Outcome.Error) == 0 || trace.Read(doc.Request.Path, doc.Received).End != trace.EndError) {
						t.Errorf("key %s: the interrupted trace lacks its error: %+v", k.key, doc.Outcome)
					}
				}
			}
		})
	}
}

// A key kept in the store (`fencegate keys create --traces`) has its own mode like a key
// of the configuration: with the gateway's mode off, the requests of a stored key whose
// mode is all keep their trace, those of a stored key without a mode and of a configured
// key do not. Every store keeps the mode.
func TestTraceModeOfStoredKeys(t *testing.T) {
	const (
		tracedKey = "fg-traced-key-0123456789"
		plainKey  = "fg-plain-key-0123456789"
	)
	for _, c := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"memory", func(t *testing.T) store.Store { st := store.NewMemory(); t.Cleanup(func() { st.Close() }); return st }},
		{"sqlite", func(t *testing.T) store.Store { return openStore(t, "sqlite:"+t.TempDir()+"/fencegate.db") }},
		{"postgres", func(t *testing.T) store.Store { return openStore(t, pgtest.Schema(t)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := c.open(t)
			createStoreKey(t, st, store.APIKey{ID: "traced", Traces: "all"}, tracedKey)
			createStoreKey(t, st, store.APIKey{ID: "plain"}, plainKey)
			e := newEnv(t, envOptions{replicas: 1, store: st, config: func(cfg *config.Config) {
				cfg.Traces = config.Traces{Mode: config.TracesOff}
				traceKeys(cfg)
			}})
			for _, k := range []struct {
				key, tenant string
				keeps       bool
			}{
				{tracedKey, "traced", true},
				{plainKey, "plain", false},
				{traceClientKey, "client", false},
			} {
				resp, got := postAPI(t, e.srv.URL+"/v1/chat/completions", traceBody, "Authorization", "Bearer "+k.key)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("key %s: %d %s", k.tenant, resp.StatusCode, got)
				}
				id := resp.Header.Get("X-Request-Id")
				if !k.keeps {
					resp, b := getTrace(t, e, id, traceAdminKey)
					if status, code := statusAndCode(resp, b); status != http.StatusNotFound || code != "trace_not_found" {
						t.Errorf("key %s: %d %s, want 404 trace_not_found: %s", k.tenant, status, code, b)
					}
					continue
				}
				doc, _ := traceOf(t, e, id)
				if doc.RequestID != id || doc.Outcome.Outcome != "completed" {
					t.Errorf("key %s: trace of %s outcome %q, want %s completed", k.tenant, doc.RequestID, doc.Outcome.Outcome, id)
				}
			}
		})
	}
}

// The trace endpoint is an admin call: the admin key reads it, a client key and no key do
// not; an unknown request is 404 request_not_found.
func TestTraceEndpointAuthAndErrors(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 1, config: func(c *config.Config) {
		c.Traces = config.Traces{Mode: config.TracesAll}
		traceKeys(c)
	}})
	resp, _ := postAPI(t, e.srv.URL+"/v1/chat/completions", traceBody, "Authorization", "Bearer "+traceClientKey)
	id := resp.Header.Get("X-Request-Id")
	for _, c := range []struct {
		key    string
		status int
		code   string
	}{
		{"", http.StatusUnauthorized, "invalid_api_key"},
		{traceClientKey, http.StatusForbidden, "admin_only"},
	} {
		resp, b := getTrace(t, e, id, c.key)
		if status, code := statusAndCode(resp, b); status != c.status || code != c.code {
			t.Errorf("key %q: %d %s, want %d %s", c.key, status, code, c.status, c.code)
		}
	}
	if doc, _ := traceOf(t, e, id); doc.RequestID != id {
		t.Fatalf("trace of %s names %s", id, doc.RequestID)
	}
	resp, b := getTraceURL(t, e.srv.URL+"/admin/requests/req_01J00000000000000000000000/trace", traceAdminKey)
	if status, code := statusAndCode(resp, b); status != http.StatusNotFound || code != "request_not_found" {
		t.Fatalf("unknown request: %d %s, want 404 request_not_found", status, code)
	}
	resp, b = getTraceURL(t, e.srv.URL+"/admin/requests/"+id+"/trace?wait=soon", traceAdminKey)
	if status, code := statusAndCode(resp, b); status != http.StatusBadRequest || code != "invalid_value" {
		t.Fatalf("?wait=soon: %d %s, want 400 invalid_value", status, code)
	}
}

// The document is kept by the SQL stores as by the memory one, for a keyed request too
// (whose writes the client writer holds until the outcome is journaled): what the client
// read of an interrupted answer is what the trace says it received.
func TestTraceKeptInSQLStores(t *testing.T) {
	for _, c := range []struct {
		name string
		dsn  func(t testing.TB) string
	}{
		{"sqlite", func(t testing.TB) string { return "sqlite:" + t.TempDir() + "/fencegate.db" }},
		{"postgres", pgtest.Schema},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openStore(t, c.dsn(t))
			e := newEnv(t, envOptions{replicas: 1, store: st, config: func(cfg *config.Config) {
				cfg.Traces = config.Traces{Mode: config.TracesErrors, MaxBytes: 200}
			}})
			resp, got := postAPI(t, e.srv.URL+"/v1/chat/completions", traceBody,
				"Idempotency-Key", "k-trace-"+c.name, "X-Sim-Fault", "reset@sent:3")
			if !bytes.Contains(got, []byte("upstream_decode_interrupted")) {
				t.Fatalf("not interrupted: %s", got)
			}
			doc, _ := traceOf(t, e, resp.Header.Get("X-Request-Id"))
			sum := sha256.Sum256(got)
			r := doc.Received
			if doc.Outcome.Outcome != "interrupted" || r.Bytes != len(got) || r.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("outcome %s, received %d bytes %s; the client read %d", doc.Outcome.Outcome, r.Bytes, r.SHA256, len(got))
			}
			// Past max_bytes the events are kept as hashes, and the transcript says so.
			hashed := 0
			for _, ch := range r.Chunks {
				if !ch.Kept() {
					hashed++
				}
			}
			if hashed == 0 || !trace.Read(doc.Request.Path, r).Hashed {
				t.Fatalf("no event past max_bytes=200 was kept as a hash: %+v", r.Chunks)
			}
		})
	}
}
