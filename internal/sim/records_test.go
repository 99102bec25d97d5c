package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestStreamHeadersBeforePrefill(t *testing.T) {
	// An hour of prefill: the client must still get its 200 at once, and
	// leaving must be noticed at once, not after the hour.
	s := startSim(t, Config{PrefillPerToken: time.Hour})
	c := newClient(t)
	ctx, cancel := context.WithCancel(testContext(t))
	req := newPost(t, ctx, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("slow prompt", map[string]any{"stream": true})),
		map[string]string{"X-Request-Id": "req_123", "X-Fencegate-Attempt": "req_123.a1"})
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Request-Id") != "req_123" {
		t.Fatalf("status %d, X-Request-Id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	rec := s.Records()[0]
	if rec.TokensComputed != 0 || rec.Outcome != "" || rec.RequestID != "req_123" || rec.AttemptID != "req_123.a1" || rec.Endpoint != "chat" || !rec.Stream {
		t.Errorf("record while prefilling = %+v", rec)
	}
	cancel()
	rec = waitRecord(t, s, ended)
	if rec.Outcome != OutcomeCancelled || rec.Ended.Before(rec.Started) {
		t.Errorf("record = %+v", rec)
	}
}

func TestClientDisconnectDuringDecode(t *testing.T) {
	s := startSim(t, Config{DecodePerToken: time.Hour})
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(testContext(t))
		req := newPost(t, ctx, s.URL()+"/v1/completions", jsonBody(t, map[string]any{"model": "sim-model", "prompt": "p", "stream": stream}), nil)
		done := make(chan error, 1)
		go func() {
			resp, err := newClient(t).Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body) // a stream's body stays open until the cancel
				resp.Body.Close()
			}
			done <- err
		}()
		// Prefill is instant: a running record with its prompt counted is
		// at most moments from waiting an hour for its first token.
		rec := waitRecord(t, s, func(r Record) bool { return r.Stream == stream && r.PromptTokens == 1 && r.Outcome == "" })
		cancel()
		<-done
		rec = waitRecord(t, s, func(r Record) bool { return r.ID == rec.ID && ended(r) })
		if rec.Outcome != OutcomeCancelled || rec.TokensComputed != 0 || rec.Endpoint != "completions" {
			t.Errorf("stream=%v: record = %+v", stream, rec)
		}
	}
	m := scrape(t, s)
	if got := metricValue(t, m, "vllm:request_success_total", `finished_reason="abort"`); got != 2 {
		t.Errorf("request_success{abort} = %v, want 2", got)
	}
}

func TestWaitRecordWakesOnEveryChange(t *testing.T) {
	var b recordBook
	r := b.add(Record{ID: "x"})
	seen := make(chan int, 10)
	result := make(chan Record, 1)
	go func() {
		rec, _ := b.wait(context.Background(), func(r Record) bool {
			seen <- r.TokensSent
			return r.TokensSent == 3
		})
		result <- rec
	}()
	// Each update must be looked at: wait until the matcher saw each value
	// before making the next change.
	for n := 1; n <= 3; n++ {
		for got := range seen {
			if got == n-1 {
				break
			}
		}
		b.setSent(r, n)
	}
	if rec := <-result; rec.TokensSent != 3 {
		t.Errorf("WaitRecord returned %+v", rec)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.wait(ctx, func(Record) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a cancelled context: %v", err)
	}
}

func TestRecordEndsOnce(t *testing.T) {
	var b recordBook
	r := b.add(Record{})
	if !b.end(r, OutcomeCrashed) || b.end(r, OutcomeCancelled) {
		t.Error("the second ending replaced the first")
	}
	b.setComputed(r, 5)
	if got := b.snapshot()[0]; got.Outcome != OutcomeCrashed || got.TokensComputed != 0 {
		t.Errorf("record changed after it ended: %+v", got)
	}
}

func TestRecordsEndpoint(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("one", nil)), map[string]string{"X-Request-Id": "req_a"})
	postJSON(t, c, s.URL()+"/v1/completions", jsonBody(t, map[string]any{"model": "sim-model", "prompt": "two"}), nil)
	waitRecord(t, s, func(r Record) bool { return r.Endpoint == "completions" && ended(r) })
	status, b := getBody(t, c, s.URL()+"/sim/requests")
	var recs []Record
	if err := json.Unmarshal(b, &recs); status != 200 || err != nil {
		t.Fatalf("status %d, %v: %s", status, err, b)
	}
	if len(recs) != 2 || recs[0].RequestID != "req_a" || recs[0].Endpoint != "chat" || recs[1].Endpoint != "completions" || recs[1].Outcome != OutcomeFinished {
		t.Errorf("records = %+v", recs)
	}
}
