package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// fencedAPI is one of the APIs besides chat and completions, as a fenced request that the
// engine leaves silent part-way (fault) until the agent ends it, and the engine records as
// hung once its connection closes.
type fencedAPI struct {
	path  string
	task  string // the sim's Config.Task
	fault string
	body  map[string]any
	// stream: the agent relays events (the first ones before the silence); otherwise it
	// reads the whole answer first.
	stream bool
}

var fencedAPIs = map[string]fencedAPI{
	"messages": {path: "/v1/messages", task: sim.TaskGenerate, fault: "hang@sent:1", stream: true,
		body: map[string]any{"model": "sim-model", "max_tokens": 50, "stream": true,
			"messages": []map[string]any{{"role": "user", "content": "tell me about leases and fences"}}}},
	"responses": {path: "/v1/responses", task: sim.TaskGenerate, fault: "hang@sent:1", stream: true,
		body: map[string]any{"model": "sim-model", "max_output_tokens": 50, "stream": true,
			"input": "tell me about leases and fences"}},
	"embeddings": {path: "/v1/embeddings", task: sim.TaskEmbed, fault: "hang@accept",
		body: map[string]any{"model": "sim-model", "input": []string{"a lease", "a fence"}}},
}

// startFenced sends api's request to a fenced agent under l, once the engine is armed to go
// silent, and returns the response (nil when the agent broke the connection before any
// headers) once the engine has the request and, for a stream, has sent its first events.
func startFenced(t *testing.T, s *sim.Server, a *Agent, api fencedAPI, l *leased) (*http.Response, chan error) {
	t.Helper()
	if err := s.ArmFault(api.fault, 1); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(api.body)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), api.path, body, l)
		got <- result{resp, err}
	}()
	// The engine is silent from here on: a stream after its first two tokens (hang@sent:1
	// fires as soon as they are flushed), embeddings as soon as the fault is read.
	waitSimRecord(t, s, l.attempt, func(r sim.Record) bool { return r.Fault != "" && (!api.stream || r.TokensSent >= 2) })
	var resp *http.Response
	if api.stream {
		r := <-got
		if r.err != nil || r.resp.StatusCode != http.StatusOK || !isEventStream(r.resp.Header) {
			t.Fatalf("fenced %s: %v %+v", api.path, r.err, r.resp)
		}
		resp = r.resp
	}
	// What the client ends with: for a stream the end of its body, otherwise the
	// response itself (which must never come: the agent breaks the connection).
	ended := make(chan error, 1)
	go func() {
		if resp != nil {
			read := readStream(resp.Body, nil)
			resp.Body.Close()
			ended <- read.err
			return
		}
		r := <-got
		if r.err == nil {
			b, _ := io.ReadAll(r.resp.Body)
			r.resp.Body.Close()
			t.Errorf("fenced %s answered %d %s after its lease ended", api.path, r.resp.StatusCode, b)
		}
		ended <- r.err
	}()
	return resp, ended
}

// requireLive fails t unless attempt l is among a's live attempts, on path.
func requireLive(t *testing.T, a *Agent, l *leased, path string) {
	t.Helper()
	for _, info := range a.Attempts() {
		if info.Attempt == l.attempt {
			if info.Path != path || info.Epoch != l.epoch || info.Ended {
				t.Fatalf("live attempt %+v", info)
			}
			return
		}
	}
	t.Fatalf("%s under a lease is not among the agent's attempts %+v: it passed through unfenced", path, a.Attempts())
}

// Messages, Responses and embeddings requests under a lease are fenced like chat: each is
// an attempt of the agent, and a cancel aborts its engine request before it is acked, so a
// rerun has its proof that the attempt stopped.
func TestFencedAPIsCancelled(t *testing.T) {
	for name, api := range fencedAPIs {
		t.Run(name, func(t *testing.T) {
			s := startSim(t, sim.Config{Task: api.task})
			clock := newFakeClock() // frozen: the lease cannot expire, only the cancel can end it
			a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now})
			l := &leased{attempt: "req_" + name + ".a1", epoch: 31, ttl: 300 * time.Millisecond}
			_, ended := startFenced(t, s, a, api, l)
			requireLive(t, a, l, api.path)

			ack, err := controlClient(t, a, "").Cancel(testContext(t), l.attempt, l.epoch)
			if err != nil || !ack.Acked || ack.Unknown || ack.AlreadyEnded {
				t.Fatalf("cancel: %+v, %v", ack, err)
			}
			if info := waitEnded(t, a, l.attempt); info.EndReason != EndRevoked || !info.Revoked {
				t.Fatalf("attempt info %+v", info)
			}
			if err := <-ended; err == nil {
				t.Fatal("the response ended cleanly after a cancel")
			}
			if rec := waitSimRecord(t, s, l.attempt, simEnded); rec.Outcome != sim.OutcomeHung {
				t.Fatalf("engine record %+v", rec)
			}
		})
	}
}

// The same requests, never renewed: the agent's expiry timer aborts them, though their
// engine is silent.
func TestFencedAPIsExpire(t *testing.T) {
	for name, api := range fencedAPIs {
		t.Run(name, func(t *testing.T) {
			s := startSim(t, sim.Config{Task: api.task})
			a := startAgent(t, Config{Engine: s.URL()})
			l := &leased{attempt: "req_" + name + ".a1", epoch: 32, ttl: 300 * time.Millisecond}
			_, ended := startFenced(t, s, a, api, l)
			info := waitEnded(t, a, l.attempt)
			if info.EndReason != EndLeaseExpired || info.Path != api.path {
				t.Fatalf("attempt info %+v", info)
			}
			if err := <-ended; err == nil {
				t.Fatal("the response ended cleanly after its lease expired")
			}
			if rec := waitSimRecord(t, s, l.attempt, simEnded); rec.Outcome != sim.OutcomeHung {
				t.Fatalf("engine record %+v", rec)
			}
		})
	}
}
