package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/tidwall/gjson"
)

// An epoch not greater than the highest seen for the logical request is
// refused with 409 stale_lease_epoch, and the engine is not called.
func TestStaleEpochRefused(t *testing.T) {
	s := startSim(t, sim.Config{})
	clock := newFakeClock()
	a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now})
	hc := newHTTPClient(t)
	ctx := testContext(t)

	resp, err := post(t, ctx, hc, a.URL(), "/v1/chat/completions", chatBody(t, 4, false), &leased{"req_stale.a1", 5, time.Second})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || gjson.GetBytes(body, "choices.0.message.content").String() == "" {
		t.Fatalf("first attempt: status %d body %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		attempt string
		epoch   uint64
	}{
		{"req_stale.a2", 5}, // epoch reused by a rerun
		{"req_stale.a2", 4}, // lower epoch
		{"req_stale.a1", 5}, // the same attempt again
	} {
		resp, err := post(t, ctx, hc, a.URL(), "/v1/chat/completions", chatBody(t, 4, false), &leased{tc.attempt, tc.epoch, time.Second})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || gjson.GetBytes(body, "error.code").String() != "stale_lease_epoch" {
			t.Fatalf("%s epoch %d: status %d body %s", tc.attempt, tc.epoch, resp.StatusCode, body)
		}
	}
	if n := len(s.Records()); n != 1 {
		t.Fatalf("engine called %d times, want 1", n)
	}
	// A newer epoch is accepted.
	resp, err = post(t, ctx, hc, a.URL(), "/v1/chat/completions", chatBody(t, 4, false), &leased{"req_stale.a2", 6, time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("newer epoch: status %d", resp.StatusCode)
	}
}

func TestInvalidLeaseHeader(t *testing.T) {
	s := startSim(t, sim.Config{})
	a := startAgent(t, Config{Engine: s.URL()})
	for _, tc := range []struct{ attempt, lease, code string }{
		{"req_bad.a1", "epoch=0;ttl_ms=100", "invalid_lease"},
		{"req_bad.a1", "ttl_ms=100", "invalid_lease"},
		{"", "epoch=1;ttl_ms=100", "missing_attempt_id"},
	} {
		req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, a.URL()+"/v1/completions", nil)
		req.Header.Set(HeaderLease, tc.lease)
		if tc.attempt != "" {
			req.Header.Set(HeaderAttempt, tc.attempt)
		}
		resp, err := newHTTPClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || gjson.GetBytes(body, "error.code").String() != tc.code {
			t.Errorf("lease %q attempt %q: status %d body %s", tc.lease, tc.attempt, resp.StatusCode, body)
		}
	}
	if n := len(s.Records()); n != 0 {
		t.Fatalf("engine called %d times", n)
	}
}

// With a secret, every control call needs it.
func TestControlCallsNeedTheSecret(t *testing.T) {
	s := startSim(t, sim.Config{})
	a := startAgent(t, Config{Engine: s.URL(), Secret: "s3cret"})
	ctx := testContext(t)
	for name, key := range map[string]string{"missing": "", "wrong": "s3cre", "longer": "s3cret!"} {
		c := controlClient(t, a, key)
		_, err := c.Renew(ctx, RenewRequest{Gateway: "gw", TTLms: 1000})
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.Status != http.StatusUnauthorized || oe.Code != "invalid_agent_key" || oe.Type != openai.TypeAuthentication {
			t.Fatalf("renew with %s key: %v", name, err)
		}
		if _, err := c.Cancel(ctx, "req_x.a1", 1); !errors.As(err, &oe) || oe.Status != http.StatusUnauthorized {
			t.Fatalf("cancel with %s key: %v", name, err)
		}
		if _, err := c.Attempts(ctx); !errors.As(err, &oe) || oe.Status != http.StatusUnauthorized {
			t.Fatalf("attempts with %s key: %v", name, err)
		}
	}
	reply := renew(t, controlClient(t, a, "s3cret"), time.Second)
	if reply.AgentTimeMs == 0 {
		t.Fatalf("renew reply %+v", reply)
	}
}

// With a secret, data requests (fenced or not) and passthrough need it too: the agent is
// the only way to its engine. The engine never sees the secret, and the agent's own health
// probe needs none.
func TestDataRequestsNeedTheSecret(t *testing.T) {
	s := startSim(t, sim.Config{})
	var seen atomic.Value
	seen.Store("")
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k := r.Header.Get(HeaderAgentKey); k != "" {
			seen.Store(k)
		}
		if r.URL.Path == "/health" {
			w.WriteHeader(http.StatusOK)
			return
		}
		// Everything else goes to the simulator.
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, s.URL()+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(engine.Close)
	a := startAgent(t, Config{Engine: engine.URL, Secret: "s3cret"})
	ctx := testContext(t)
	hc := newHTTPClient(t)
	do := func(method, path, key string, body []byte, l *leased) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, a.URL()+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set(HeaderAgentKey, key)
		}
		if l != nil {
			SetLeaseHeaders(req.Header, l.attempt, l.epoch, l.ttl, "gw-test")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	body := chatBody(t, 2, false)
	for _, key := range []string{"", "s3cre", "s3cret!"} {
		for what, status := range map[string]int{
			"fenced":      do("POST", "/v1/chat/completions", key, body, &leased{"req_k.a1", 1, time.Second}),
			"unfenced":    do("POST", "/v1/chat/completions", key, body, nil),
			"passthrough": do("GET", "/v1/models", key, nil, nil),
			"engine":      do("GET", "/health", key, nil, nil),
		} {
			if status != http.StatusUnauthorized {
				t.Errorf("%s request with key %q: status %d, want 401", what, key, status)
			}
		}
	}
	if n := len(s.Records()); n != 0 {
		t.Fatalf("the engine ran %d requests without the secret", n)
	}
	for what, status := range map[string]int{
		"fenced":                     do("POST", "/v1/chat/completions", "s3cret", body, &leased{"req_k.a2", 2, time.Second}),
		"unfenced":                   do("POST", "/v1/chat/completions", "s3cret", body, nil),
		"passthrough":                do("GET", "/v1/models", "s3cret", nil, nil),
		"agent health without a key": do("GET", PathHealth, "", nil, nil),
	} {
		if status != http.StatusOK {
			t.Errorf("%s: status %d, want 200", what, status)
		}
	}
	if k := seen.Load().(string); k != "" {
		t.Errorf("the engine saw the agent's secret %q", k)
	}
}

func TestFromLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5000":        true,
		"[::1]:5000":            true,
		"[::ffff:127.0.0.1]:80": true,
		"10.1.2.3:5000":         false,
		"[2001:db8::1]:5000":    false,
		"garbage":               false,
	} {
		r := &http.Request{RemoteAddr: addr}
		if got := fromLoopback(r); got != want {
			t.Errorf("fromLoopback(%q) = %v", addr, got)
		}
	}
}

// The renewal is the gateway's heartbeat, so it must be answered while the
// engine is saturated: here one request runs, two wait in the engine's queue,
// and the renewal comes back and reports them, from the cached scrape.
func TestHeartbeatAnsweredWhileEngineSaturated(t *testing.T) {
	s := startSim(t, sim.Config{MaxRunning: 1, DecodePerToken: 50 * time.Millisecond})
	clock := newFakeClock()
	a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now, Fingerprint: map[string]string{"revision": "pinned-r9"}})
	ctl := controlClient(t, a, "")
	hc := newHTTPClient(t)
	ctx, cancelStreams := context.WithCancel(testContext(t))
	defer cancelStreams()

	var leases []lease.Lease
	for i, id := range []string{"req_busy1.a1", "req_busy2.a1", "req_busy3.a1"} {
		l := &leased{attempt: id, epoch: uint64(100 + i), ttl: 500 * time.Millisecond}
		resp, err := post(t, ctx, hc, a.URL(), "/v1/chat/completions", chatBody(t, 400, true), l)
		if err != nil {
			t.Fatal(err)
		}
		// The sim answers with headers when a request is queued, so all
		// three are in the engine, one running, once this returns.
		defer resp.Body.Close()
		leases = append(leases, lease.Lease{Attempt: l.attempt, Epoch: l.epoch})
	}
	a.scrapeOnce(ctx) // the background scrape may have run before the queue filled

	reply := renew(t, ctl, 500*time.Millisecond, leases...)
	if reply.Engine.Waiting < 1 || reply.Engine.Running != 1 || !reply.Engine.Up {
		t.Fatalf("engine load %+v, want 1 running and requests waiting", reply.Engine)
	}
	for _, l := range leases {
		if st := reply.Statuses()[l.Attempt]; st != lease.Renewed {
			t.Fatalf("%s: %v", l.Attempt, st)
		}
	}
	if reply.Fingerprint["served_model"] != "sim-model" || reply.Fingerprint["block_size"] != "16" || reply.Fingerprint["revision"] != "pinned-r9" {
		t.Fatalf("fingerprint %v", reply.Fingerprint)
	}
	if reply.Engine.ScrapeMs == 0 {
		t.Fatal("scraped_at_ms not set")
	}
}

// The attempts listing shows a live attempt; once it is cancelled, only the
// ended listing does.
func TestAttemptsListing(t *testing.T) {
	s := startSim(t, sim.Config{})
	if err := s.ArmFault("hang@sent:3", 1); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now})
	ctl := controlClient(t, a, "")
	l := &leased{attempt: "req_list.a1", epoch: 77, ttl: 400 * time.Millisecond}
	resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions", chatBody(t, 50, true), l)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitSimRecord(t, s, l.attempt, func(r sim.Record) bool { return r.TokensSent == 4 })

	list, err := ctl.Attempts(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("listing %+v", list)
	}
	got := list[0]
	wantExpiry := clock.Now().Add(l.ttl)
	if got.Attempt != l.attempt || got.Epoch != l.epoch || got.Revoked || got.Ended || got.Gateway != "gw-test" ||
		!got.ExpiresAt.Equal(wantExpiry) || got.EngineStatus != http.StatusOK {
		t.Fatalf("listed %+v", got)
	}
	if _, err := ctl.Cancel(testContext(t), l.attempt, l.epoch); err != nil {
		t.Fatal(err)
	}
	if list, _ := ctl.Attempts(testContext(t)); len(list) != 0 {
		t.Fatalf("after the cancel: %+v", list)
	}
	var all AttemptList
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodGet, a.URL()+PathAttempts+"?ended=1", nil)
	r, err := newHTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if err := jsonDecode(r.Body, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Attempts) != 1 || !all.Attempts[0].Ended || all.Attempts[0].EndReason != EndRevoked || !all.Attempts[0].Revoked {
		t.Fatalf("ended listing %+v", all.Attempts)
	}
}
