package failover

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

const (
	roleOnly = sse.Class(0)
	output   = sse.Output
	finish   = sse.Finish
	done     = sse.Done
)

func streamCfg() Config {
	return Config{RequestID: "req_1", Model: "m", Stream: true, MaxAttempts: 2,
		FirstTokenTimeout: 120 * time.Second, IdleTimeout: 30 * time.Second, Keepalive: 15 * time.Second}
}

func chunk(attempt int, c sse.Class) Event {
	tokens := 0
	if c&sse.Output != 0 {
		tokens = 1
	}
	ev := Event{Kind: EvChunk, Attempt: attempt, Chunk: c, Tokens: tokens}
	if c&sse.Finish != 0 {
		ev.Finished = 1 // choice 0
	}
	return ev
}

func failed(attempt int, f FailureClass, reason EndReason) Event {
	return Event{Kind: EvFailed, Attempt: attempt, Failure: f, Reason: reason}
}

func expectKinds(t *testing.T, got []Action, want string) {
	t.Helper()
	if k := kinds(got); k != want {
		t.Fatalf("actions = %q, want %q", k, want)
	}
}

func TestCompleteStream(t *testing.T) {
	s := newShell(t, streamCfg())
	expectKinds(t, s.step(Event{Kind: EvStart}), "start(1)")
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	expectKinds(t, s.step(chunk(1, roleOnly)), "hold(1)")
	expectKinds(t, s.step(chunk(1, output)), "headers mark-first-delta(1) write-held(1) write(1)")
	expectKinds(t, s.step(chunk(1, output)), "write(1)")
	expectKinds(t, s.step(chunk(1, finish)), "write(1)")
	expectKinds(t, s.step(chunk(1, done)), "write(1) end(1) finish")
	if s.m.Outcome() != Completed || s.m.Delivered() != 2 {
		t.Fatalf("outcome %v delivered %d", s.m.Outcome(), s.m.Delivered())
	}
}

// Kill during prefill: nothing was delivered, so the request is rerun and the first
// replica's held role chunk is discarded.
func TestDeadBeforeBoundaryReruns(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, roleOnly))
	expectKinds(t, s.step(failed(1, Dead, "connection_reset")), "cancel(1) discard-held(1) start(2)")
	if !s.m.Tried("a") || s.m.Tried("b") {
		t.Fatal("Tried does not report the first replica")
	}
	s.step(Event{Kind: EvDispatched, Attempt: 2, Replica: "b"})
	// A late event of the fenced attempt is dropped.
	expectKinds(t, s.step(chunk(1, output)), "")
	expectKinds(t, s.step(chunk(2, output)), "headers mark-first-delta(2) write(2)")
	s.step(chunk(2, finish))
	s.step(chunk(2, done))
	if s.m.Outcome() != Completed || len(s.m.Attempts()) != 2 {
		t.Fatalf("outcome %v attempts %+v", s.m.Outcome(), s.m.Attempts())
	}
	if a := s.m.Attempts()[0]; a.EndReason != "connection_reset" || a.Failure != Dead {
		t.Fatalf("first attempt recorded as %+v", a)
	}
}

// Crash right after the first delta: the stream ends with the interruption, no rerun.
func TestDeadAfterBoundaryInterrupts(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, roleOnly))
	s.step(chunk(1, output))
	acts := s.step(failed(1, Dead, "connection_reset"))
	expectKinds(t, acts, "cancel(1) fail")
	f := acts[1]
	if !f.AsEvent || f.Outcome != Interrupted {
		t.Fatalf("fail action %+v", f)
	}
	e := f.Err
	if e.Code != "upstream_decode_interrupted" || e.Type != "upstream_error" || e.RequestID != "req_1" ||
		!*e.PartialOutput || *e.DeliveredOutputTokens != 1 || *e.Retryable {
		t.Fatalf("interruption error %+v", e)
	}
	if len(s.started) != 1 {
		t.Fatalf("attempts started: %v", s.started)
	}
}

// Silence after the first delta: interrupted at the idle timeout, never rerun.
func TestHangAfterBoundaryInterruptsAtIdleTimeout(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, output))
	if got, want := s.m.Deadline(), s.now.Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("deadline %v, want %v", got, want)
	}
	s.advance(29 * time.Second)
	expectKinds(t, s.step(Event{Kind: EvTick}), "")
	acts := s.tickUntilDeadline()
	expectKinds(t, acts, "cancel(1) fail")
	if acts[1].Err.Code != "upstream_decode_interrupted" || s.m.Attempts()[0].EndReason != "idle_timeout" {
		t.Fatalf("got %+v / %+v", acts[1].Err, s.m.Attempts()[0])
	}
}

// Direct mode: an uncertain attempt before the boundary cannot be proven stopped, so it is
// not rerun; the error says why and that the client may retry.
func TestUncertainBeforeBoundaryNotRerunInDirectMode(t *testing.T) {
	cfg := streamCfg()
	cfg.Keepalive = 0
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	acts := s.tickUntilDeadline()
	expectKinds(t, acts, "cancel(1) fail")
	e := acts[1].Err
	if e.Code != "upstream_unresponsive" || e.Status != 504 || !*e.Retryable || *e.PartialOutput || acts[1].AsEvent {
		t.Fatalf("error %+v asEvent=%v", e, acts[1].AsEvent)
	}
}

// With a worker-side lease the uncertain attempt is fenced and may be rerun.
func TestUncertainBeforeBoundaryRerunsWhenFenceable(t *testing.T) {
	cfg := streamCfg()
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a", Fenceable: true})
	s.now = s.now.Add(cfg.FirstTokenTimeout)
	acts := s.step(Event{Kind: EvTick})
	// Keepalives fall due first (every 15s); the last tick both keeps alive and fails. The
	// rerun waits until the uncertain attempt is proven stopped.
	if k := kinds(acts); k != "cancel(1) headers keepalive" || !acts[0].AwaitFence {
		t.Fatalf("actions %q %+v", k, acts)
	}
	expectKinds(t, s.step(Event{Kind: EvFenced, Attempt: 2}), "")
	expectKinds(t, s.step(Event{Kind: EvFenced, Attempt: 1, Reason: "lease_expired"}), "start(2)")
	expectKinds(t, s.step(Event{Kind: EvFenced, Attempt: 1}), "")
}

// A worker-side lease is per attempt: a fenceable attempt that goes silent is fenced and
// rerun; the client leaving while it is fenced ends the request without a rerun.
func TestFenceableAttemptWaitsForFence(t *testing.T) {
	cfg := streamCfg()
	cfg.Keepalive = 0
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a", Fenceable: true})
	s.step(chunk(1, roleOnly))
	acts := s.step(failed(1, Uncertain, "agent_unreachable"))
	expectKinds(t, acts, "cancel(1) discard-held(1)")
	if !acts[0].AwaitFence || s.m.Attempts()[0].EndReason != "agent_unreachable" {
		t.Fatalf("%+v", acts)
	}
	expectKinds(t, s.step(Event{Kind: EvClientGone}), "finish")
	// After the boundary an uncertain fenceable attempt is interrupted, not awaited.
	s2 := newShell(t, cfg)
	s2.step(Event{Kind: EvStart})
	s2.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a", Fenceable: true})
	s2.step(chunk(1, output))
	acts = s2.step(failed(1, Uncertain, "agent_unreachable"))
	if acts[0].AwaitFence || acts[len(acts)-1].Err.Code != "upstream_decode_interrupted" {
		t.Fatalf("%s", kinds(acts))
	}
}

// A slow first token is no failure: keepalives go out (not output) and nothing is rerun.
func TestSlowFirstTokenKeepsAlive(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	expectKinds(t, s.tickUntilDeadline(), "headers keepalive")
	expectKinds(t, s.tickUntilDeadline(), "keepalive")
	if s.m.Committed() {
		t.Fatal("keepalive crossed the boundary")
	}
	expectKinds(t, s.step(chunk(1, output)), "mark-first-delta(1) write(1)")
	// Failure before boundary after headers went out: an SSE error event, partial false.
	s2 := newShell(t, streamCfg())
	s2.step(Event{Kind: EvStart})
	s2.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s2.tickUntilDeadline()
	s2.step(failed(1, Dead, "connection_reset"))
	s2.step(Event{Kind: EvDispatched, Attempt: 2, Replica: "b"})
	acts := s2.step(failed(2, Dead, "connection_reset"))
	if f := acts[len(acts)-1]; f.Kind != ActFail || !f.AsEvent || *f.Err.PartialOutput || f.Err.Code != "upstream_unavailable" {
		t.Fatalf("fail %+v err %+v", f, f.Err)
	}
}

func TestClientGoneCancelsAndNeverReruns(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, output))
	expectKinds(t, s.step(Event{Kind: EvClientGone}), "cancel(1) finish")
	if s.m.Outcome() != Cancelled {
		t.Fatalf("outcome %v", s.m.Outcome())
	}
	expectKinds(t, s.step(failed(1, Dead, "connection_reset")), "")
}

func TestNoReplica(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	acts := s.step(Event{Kind: EvNoReplica, Attempt: 1})
	expectKinds(t, acts, "fail")
	if e := acts[0].Err; e.Status != 503 || e.Code != "no_healthy_replica" || !*e.Retryable {
		t.Fatalf("error %+v", e)
	}
}

func TestEndWithoutDone(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, output))
	s.step(chunk(1, finish))
	acts := s.step(Event{Kind: EvEnd, Attempt: 1})
	if k := kinds(acts); k != "end(1) finish" || !acts[1].WriteDone {
		t.Fatalf("actions %+v", acts)
	}
	// Without a finish chunk, an EOF is a death mid-stream.
	s2 := newShell(t, streamCfg())
	s2.step(Event{Kind: EvStart})
	s2.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s2.step(chunk(1, output))
	acts = s2.step(Event{Kind: EvEnd, Attempt: 1})
	if acts[len(acts)-1].Err.Code != "upstream_decode_interrupted" {
		t.Fatalf("actions %+v", acts)
	}
}

func TestNonStreamBody(t *testing.T) {
	cfg := streamCfg()
	cfg.Stream = false
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(failed(1, Dead, "engine_status_500"))
	s.step(Event{Kind: EvDispatched, Attempt: 2, Replica: "b"})
	expectKinds(t, s.step(Event{Kind: EvBody, Attempt: 2, Tokens: 7}), "mark-first-delta(2) write(2) end(2) finish")
	if s.m.Delivered() != 7 {
		t.Fatalf("delivered %d", s.m.Delivered())
	}
}

// The policy table: each failure class before the boundary, with and without attempts and
// budget left.
func TestPolicyTable(t *testing.T) {
	engine429 := &openai.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "busy"}
	engine400 := &openai.Error{Status: 400, Type: "invalid_request_error", Code: "bad", Message: "bad input"}
	cases := []struct {
		name        string
		class       FailureClass
		engineErr   *openai.Error
		maxAttempts int
		budget      *RetryBudget
		canFence    bool
		wantRerun   bool
		wantCode    string
		wantStatus  int
		retryable   bool
	}{
		{"dead reruns", Dead, nil, 2, nil, false, true, "", 0, false},
		{"overloaded reruns", Overloaded, engine429, 2, nil, false, true, "", 0, false},
		{"dead, out of attempts", Dead, nil, 1, nil, false, false, "upstream_unavailable", 502, true},
		{"overloaded, out of attempts keeps engine error", Overloaded, engine429, 1, nil, false, false, "rate_limit_exceeded", 429, true},
		{"rejected input never reruns", Rejected, engine400, 3, nil, false, false, "bad", 400, false},
		{"uncertain direct mode", Uncertain, nil, 3, nil, false, false, "upstream_unresponsive", 504, true},
		{"uncertain fenced reruns", Uncertain, nil, 3, nil, true, true, "", 0, false},
		{"budget exhausted", Dead, nil, 3, NewRetryBudget(0, 0, 1, time.Unix(0, 0)).drain(), false, false, "retry_budget_exhausted", 503, true},
		{"budget available", Dead, nil, 3, NewRetryBudget(0, 0, 1, time.Unix(0, 0)), false, true, "", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := streamCfg()
			cfg.MaxAttempts, cfg.RetryBudget, cfg.Keepalive = c.maxAttempts, c.budget != nil, 0
			s := newShell(t, cfg)
			s.budget = c.budget
			s.step(Event{Kind: EvStart})
			s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a", Fenceable: c.canFence})
			var e *openai.Error
			if c.engineErr != nil {
				cp := *c.engineErr
				e = &cp
			}
			acts := s.step(Event{Kind: EvFailed, Attempt: 1, Failure: c.class, Reason: "r", Err: e})
			if c.class == Uncertain && c.wantRerun {
				if !acts[0].AwaitFence {
					t.Fatalf("an uncertain attempt's rerun must wait for its fence: %+v", acts)
				}
				acts = s.step(Event{Kind: EvFenced, Attempt: 1})
			}
			last := acts[len(acts)-1]
			if c.wantRerun {
				if last.Kind != ActStartAttempt || last.Attempt != 2 || !last.Rerun {
					t.Fatalf("want rerun, got %s", kinds(acts))
				}
				return
			}
			if last.Kind != ActFail || last.Err.Code != c.wantCode || last.Err.Status != c.wantStatus || *last.Err.Retryable != c.retryable {
				t.Fatalf("got %s err %+v", kinds(acts), last.Err)
			}
		})
	}
}

func (b *RetryBudget) drain() *RetryBudget { b.tokens = 0; return b }

func TestRetryBudget(t *testing.T) {
	var nilBudget *RetryBudget
	if !nilBudget.TryRerun(time.Unix(0, 0)) {
		t.Fatal("nil budget must allow reruns")
	}
	nilBudget.OnRequest(time.Unix(0, 0)) // must not panic
	t0 := time.Unix(100, 0)
	b := NewRetryBudget(0.2, 3, 10, t0)
	for i := 0; i < 10; i++ {
		if !b.TryRerun(t0) {
			t.Fatalf("rerun %d denied from a full bucket", i)
		}
	}
	if b.TryRerun(t0) {
		t.Fatal("rerun allowed from an empty bucket")
	}
	for i := 0; i < 5; i++ {
		b.OnRequest(t0) // 5 requests × 20% = one rerun
	}
	if !b.TryRerun(t0) || b.TryRerun(t0) {
		t.Fatal("5 requests at 20% must buy exactly one rerun")
	}
	if !b.TryRerun(t0.Add(time.Second)) {
		t.Fatal("the per-second floor must refill")
	}
	if got := b.Tokens(t0.Add(time.Hour)); got != 10 {
		t.Fatalf("bucket must cap at burst, got %v", got)
	}
}

// The retry budget is asked last (docs/design.md §3): a rerun that any other check refuses
// never asks it and spends nothing, and a dial failure, always rerun, does not ask it
// either. Only a rerun every other check allows withdraws from it, once.
func TestRetryBudgetAskedLast(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name  string
		setup func(*Config)
		ev    []Event // after EvStart and the dispatch of attempt 1
		asked bool
	}{
		{"after the boundary", nil, []Event{chunk(1, output), failed(1, Dead, "r")}, false},
		{"rejected input", nil, []Event{failed(1, Rejected, "r")}, false},
		{"engine may have acted", func(c *Config) { c.EngineTools = []string{"mcp"} }, []Event{failed(1, Dead, "r")}, false},
		{"uncertain, not fenceable", nil, []Event{failed(1, Uncertain, "r")}, false},
		{"dial failure", nil, []Event{{Kind: EvFailed, Attempt: 1, Failure: Dead, Reason: EndConnectionRefused, Dial: true}}, false},
		{"out of attempts", func(c *Config) { c.MaxAttempts = 1 }, []Event{failed(1, Dead, "r")}, false},
		{"too expensive", func(c *Config) { c.RerunTokenLimit, c.PromptTokens = 10, 11 }, []Event{failed(1, Dead, "r")}, false},
		{"allowed otherwise", nil, []Event{failed(1, Dead, "r")}, true},
		{"timeout, then keepalive", func(c *Config) { c.Keepalive = 120 * time.Second; c.FirstTokenTimeout = 120 * time.Second }, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := streamCfg()
			cfg.Keepalive, cfg.RetryBudget = 0, true
			if c.setup != nil {
				c.setup(&cfg)
			}
			s := newShell(t, cfg)
			s.budget = NewRetryBudget(0, 0, 1, t0)
			s.step(Event{Kind: EvStart})
			s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a", Fenceable: c.name == "timeout, then keepalive"})
			var acts []Action
			for _, ev := range c.ev {
				acts = s.step(ev)
			}
			if c.ev == nil {
				acts = s.tickUntilDeadline()
			}
			if got := s.asks == 1; got != c.asked || s.asks > 1 {
				t.Fatalf("budget asked %d times (%s)", s.asks, kinds(acts))
			}
			if left := s.budget.Tokens(s.now); (left == 0) != c.asked {
				t.Fatalf("%v rerun tokens left after %s", left, kinds(acts))
			}
			if c.ev == nil {
				// The keepalive the failing tick owed comes after the answer, in the same step.
				expectKinds(t, acts, "try-rerun(1) cancel(1) headers keepalive")
			}
		})
	}
}

// Every replica down: dial failures do not use up attempts, each replica is tried once, and
// the client gets 503 no_healthy_replica.
func TestDialFailuresEndInNoReplica(t *testing.T) {
	cfg := streamCfg()
	cfg.MaxAttempts = 1
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	for n, replica := range []string{"a", "b", "c"} {
		s.step(Event{Kind: EvDispatched, Attempt: n + 1, Replica: replica})
		acts := s.step(Event{Kind: EvFailed, Attempt: n + 1, Failure: Dead, Reason: "connection_refused", Dial: true})
		if last := acts[len(acts)-1]; last.Kind != ActStartAttempt {
			t.Fatalf("dial failure %d not rerun: %s", n+1, kinds(acts))
		}
	}
	acts := s.step(Event{Kind: EvNoReplica, Attempt: 4})
	if e := acts[0].Err; acts[0].Kind != ActFail || e.Status != 503 || e.Code != "no_healthy_replica" {
		t.Fatalf("got %s %+v", kinds(acts), acts[0].Err)
	}
}

func TestAbortEndsWithoutRerun(t *testing.T) {
	s := newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, roleOnly))
	acts := s.step(Event{Kind: EvAbort, Reason: "ownership_lost", Err: &openai.Error{Status: 503, Code: "ownership_lost", Message: "x"}})
	expectKinds(t, acts, "cancel(1) discard-held(1) fail")
	if e := acts[2].Err; e.Code != "ownership_lost" || *e.Retryable || acts[2].AsEvent {
		t.Fatalf("error %+v", e)
	}
}

func TestRerunCostAndShed(t *testing.T) {
	cfg := streamCfg()
	cfg.RerunTokenLimit, cfg.PromptTokens = 1000, 400
	s := newShell(t, cfg)
	s.m.SetPromptTokens(5000)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	acts := s.step(failed(1, Dead, "connection_reset"))
	if last := acts[len(acts)-1]; last.Kind != ActFail || last.Err.Code != "rerun_too_expensive" {
		t.Fatalf("got %s %+v", kinds(acts), last.Err)
	}
	// A dial failure never reached the replica: nothing to prefill again, no cost check.
	s2 := newShell(t, cfg)
	s2.m.SetPromptTokens(5000)
	s2.step(Event{Kind: EvStart})
	s2.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	if acts := s2.step(Event{Kind: EvFailed, Attempt: 1, Failure: Dead, Reason: "connection_refused", Dial: true}); acts[len(acts)-1].Kind != ActStartAttempt {
		t.Fatalf("got %s", kinds(acts))
	}
	acts = s2.step(Event{Kind: EvNoReplica, Attempt: 2, Reason: NoReplicaOverloaded})
	if e := acts[0].Err; e.Status != 429 || e.Code != "pool_overloaded" {
		t.Fatalf("shed error %+v", e)
	}
}

// A wait in the pool's queue ends the request, when no slot came, with the queue's own
// codes; keepalives went on while it waited, and nothing was delivered.
func TestQueueEnds(t *testing.T) {
	for _, tc := range []struct {
		reason EndReason
		status int
		code   string
	}{{NoReplicaQueueFull, 429, "queue_full"}, {NoReplicaQueueTimeout, 503, "queue_timeout"}} {
		s := newShell(t, Config{Stream: true, Keepalive: time.Second, MaxAttempts: 2})
		t0 := s.now
		s.step(Event{Kind: EvStart})
		// Waiting: the attempt is not dispatched, and keepalives go out.
		s.now = t0.Add(time.Second)
		if acts := s.step(Event{Kind: EvTick}); len(acts) != 2 || acts[0].Kind != ActSendHeaders || acts[1].Kind != ActKeepalive {
			t.Fatalf("%s: while queued got %s", tc.code, kinds(acts))
		}
		acts := s.step(Event{Kind: EvNoReplica, Attempt: 1, Reason: tc.reason})
		last := acts[len(acts)-1]
		if last.Kind != ActFail || last.Err.Status != tc.status || last.Err.Code != tc.code || !last.AsEvent {
			t.Fatalf("%s: got %s %+v", tc.code, kinds(acts), last.Err)
		}
		if s.m.Committed() || s.m.Outcome() != Failed {
			t.Fatalf("%s: committed %v, outcome %v", tc.code, s.m.Committed(), s.m.Outcome())
		}
	}
}
