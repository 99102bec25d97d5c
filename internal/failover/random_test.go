package failover

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

// TestRandomSchedules drives machines with random event orders (seeded, reproducible) and
// lets the shell harness check the invariants after every step: at most one attempt ever
// publishes, nothing is written before first_delta_sent is recorded, no attempt starts after
// the boundary or after the client left, attempts stay within max_attempts, and every request
// ends with exactly one terminal action.
func TestRandomSchedules(t *testing.T) {
	classes := []sse.Class{0, sse.Output, sse.Output, sse.Finish, sse.Finish, sse.Output | sse.Finish, sse.Output | sse.Finish,
		sse.Usage, sse.Done, sse.Done, sse.Done, sse.Comment, sse.Error, sse.Malformed}
	failures := []FailureClass{Dead, Uncertain, Overloaded, Rejected}
	outcomes := map[Outcome]int{}
	reruns, asked, budgetDenied, passChecks := 0, 0, 0, 0
	for seed := uint64(1); seed <= 3000; seed++ {
		r := rand.New(rand.NewPCG(seed, seed*7919))
		cfg := Config{
			RequestID: "req_r", Model: "m", Stream: r.IntN(4) != 0, MaxAttempts: 1 + r.IntN(4),
			FirstTokenTimeout: time.Duration(1+r.IntN(5)) * time.Second,
			IdleTimeout:       time.Duration(1+r.IntN(3)) * time.Second,
			Keepalive:         time.Duration(r.IntN(3)) * time.Second,
			Choices:           1 + r.IntN(3),
			DurableBoundary:   r.IntN(3) == 0,
		}
		if r.IntN(4) == 0 {
			cfg.MaxDuration = time.Duration(2+r.IntN(10)) * time.Second
		}
		if r.IntN(4) == 0 {
			cfg.EngineTools, cfg.RerunEngineTools = []string{"mcp"}, r.IntN(3) == 0
		}
		if r.IntN(4) == 0 {
			cfg.MaxHeldBytes = 100 + r.IntN(200)
		}
		var budget *RetryBudget
		if r.IntN(3) == 0 {
			budget = NewRetryBudget(0.2, 1, float64(1+r.IntN(2)), time.Unix(1_700_000_000, 0))
			cfg.RetryBudget = true
		}
		calm := r.IntN(3) == 0
		s := newShell(t, cfg)
		s.budget = budget
		s.step(Event{Kind: EvStart})
		for step := 0; step < 60 && !s.m.Done(); step++ {
			cur := s.m.Current()
			attempt := cur
			if cur > 1 && r.IntN(5) == 0 {
				attempt = 1 + r.IntN(cur-1) // a stale, fenced attempt
			}
			var ev Event
			if s.recordPending {
				// The shell answers a boundary record before anything else.
				ev = Event{Kind: EvBoundaryRecorded}
				if r.IntN(5) == 0 {
					ev.Err = &openai.Error{Status: 503, Code: "journal_unavailable", Message: "down"}
				}
				s.step(ev)
				continue
			}
			x := r.IntN(100)
			if calm && x < 77 && !(s.pendingStart == cur && x < 60) && r.IntN(5) != 0 {
				x = 99 // a calm schedule: mostly chunks, few failures
			}
			switch {
			case x >= 95 && x != 99:
				ev = Event{Kind: EvFenced, Attempt: attempt, Reason: "lease_expired"}
			case s.pendingStart == cur && x < 60:
				s.pendingStart = 0
				if r.IntN(10) == 0 {
					ev = Event{Kind: EvNoReplica, Attempt: cur}
				} else {
					ev = Event{Kind: EvDispatched, Attempt: cur, Replica: string(rune('a' + cur)), Fenceable: r.IntN(2) == 0}
				}
			case x < 61 && r.IntN(4) == 0:
				ev = Event{Kind: EvClientGone, Stalled: r.IntN(2) == 0}
				s.clientGone = true
			case x < 68:
				ev = Event{Kind: EvFailed, Attempt: attempt, Failure: failures[r.IntN(len(failures))], Reason: "random",
					Err: &openai.Error{Status: 500, Message: "x"}, Dial: r.IntN(4) == 0}
				if !ev.Dial && r.IntN(3) == 0 {
					ev.Status = []int{429, 503, 500, 400}[r.IntN(4)]
				}
			case x < 70:
				ev = Event{Kind: EvEnd, Attempt: attempt}
			case x < 74:
				s.advance(time.Duration(r.IntN(3000)) * time.Millisecond)
				ev = Event{Kind: EvTick}
			case x < 75:
				ev = Event{Kind: EvAbort, Reason: "abort", Err: &openai.Error{Status: 503, Message: "abort"}}
			case x < 77 && !cfg.Stream:
				ev = Event{Kind: EvBody, Attempt: attempt, Tokens: r.IntN(9)}
			default:
				c := classes[r.IntN(len(classes))]
				for calm && (c&(sse.Error|sse.Malformed) != 0 || (c&sse.Done != 0 && !s.m.AllFinished())) {
					c = classes[r.IntN(len(classes))]
				}
				ev = chunk(attempt, c)
				ev.Size = r.IntN(120)
				if c&sse.Finish != 0 {
					ev.Finished = 1 << r.IntN(cfg.Choices)
					if r.IntN(2) == 0 {
						ev.Finished = 1<<cfg.Choices - 1
					}
				}
				if c&sse.Error != 0 {
					ev.Err = &openai.Error{Status: 500, Message: "engine"}
				}
			}
			s.advance(time.Duration(r.IntN(200)) * time.Millisecond)
			s.step(ev)
		}
		if !s.m.Done() {
			// Whatever is left, the client leaving ends it.
			s.clientGone = true
			s.step(Event{Kind: EvClientGone})
		}
		if len(s.terminal) != 1 {
			t.Fatalf("seed %d: %d terminal actions", seed, len(s.terminal))
		}
		if s.m.Outcome() == Interrupted && s.publisher == 0 {
			t.Fatalf("seed %d: interrupted without anything delivered", seed)
		}
		outcomes[s.m.Outcome()]++

		if len(s.started) > 1 {
			reruns++
		}
		if t := s.terminal[0]; t.Kind == ActFail && t.Err.Code == "retry_budget_exhausted" {
			budgetDenied++
		}
		asked += s.asks
		passChecks += s.passChecks
	}
	// The schedules must reach every ending, or the invariants above prove little.
	for _, o := range []Outcome{Completed, Interrupted, Failed, Cancelled, ClientStalled} {
		if outcomes[o] < 50 {
			t.Errorf("only %d schedules ended %v: %v", outcomes[o], o, outcomes)
		}
	}
	if reruns < 100 {
		t.Errorf("only %d schedules reran", reruns)
	}
	if passChecks < 200 {
		t.Errorf("only %d passing chunks were checked against their steps one by one", passChecks)
	}
	if asked < 100 || budgetDenied < 10 {
		t.Errorf("the retry budget was asked %d times and denied %d schedules", asked, budgetDenied)
	}
}
