package sim

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"
)

func TestCrashRefusesThenRestartServes(t *testing.T) {
	s := startSim(t, Config{Name: "r1"})
	c := newClient(t)
	url := s.URL()
	s.Crash()
	s.Crash() // crashing a dead replica changes nothing
	if _, err := c.Get(url + "/health"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("health of a crashed replica: %v, want connection refused", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil { // restarting a live replica changes nothing
		t.Fatal(err)
	}
	if s.URL() != url {
		t.Errorf("URL changed across restart: %s then %s", url, s.URL())
	}
	if status, b := getBody(t, c, url+"/health"); status != http.StatusOK || len(b) != 0 {
		t.Errorf("health after restart: %d %q", status, b)
	}
}

func TestRestartAfter(t *testing.T) {
	s := startSim(t, Config{RestartAfter: time.Millisecond})
	c := newClient(t)
	crashing := newPost(t, testContext(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", nil)), map[string]string{"X-Sim-Fault": "crash@prefill"})
	if _, err := c.Do(crashing); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("crashing request: %v, want a reset", err)
	}
	if err := s.WaitUp(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if status, _ := postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", nil)), nil); status != http.StatusOK {
		t.Errorf("after the automatic restart: status %d", status)
	}
	recs := s.Records()
	if len(recs) != 2 || recs[0].Outcome != OutcomeCrashed {
		t.Errorf("records = %+v", recs)
	}
}

func TestCloseStopsPendingRestart(t *testing.T) {
	s, err := Start(Config{RestartAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Crash()
	if err := s.Close(); err != nil { // must not wait for the hour
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Restart(); err == nil {
		t.Error("Restart after Close succeeded")
	}
	if err := s.WaitUp(context.Background()); err == nil {
		t.Error("WaitUp after Close succeeded")
	}
}

func TestCloseEndsInFlightRequests(t *testing.T) {
	s, err := Start(Config{DecodePerToken: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t)
	progress := make(chan int, 10)
	done := make(chan observation, 1)
	req := newPost(t, testContext(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", map[string]any{"stream": true})), nil)
	go func() { done <- observe(testContext(t), c, req, progress) }()
	waitProgress(t, progress, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.err == nil {
		t.Error("the stream ended cleanly although the replica was closed under it")
	}
	if rec := s.Records()[0]; rec.Outcome != OutcomeCrashed {
		t.Errorf("record = %+v", rec)
	}
}

func TestWaitUpHonoursContext(t *testing.T) {
	s := startSim(t, Config{})
	s.Crash()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitUp(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitUp on a down replica with a cancelled context: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{DecodePerToken: -1},
		{MaxWaiting: -1},
		{CacheConfig: map[string]string{"bad-label": "x"}},
		{CacheConfig: map[string]string{"revision": "r1"}}, // not a CacheConfig field: vLLM has no such label
		{CacheConfig: map[string]string{"block_size": "0"}},
		{DivergeFirst: -1},
		{Addr: "not an address"},
	}
	for _, cfg := range bad {
		if s, err := Start(cfg); err == nil {
			s.Close()
			t.Errorf("Start(%+v) succeeded, want an error", cfg)
		}
	}
}
