package failover

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

func started(t *testing.T, cfg Config, fenceable bool) *shell {
	t.Helper()
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a", Fenceable: fenceable})
	return s
}

func finishChoice(attempt, choice int) Event {
	return Event{Kind: EvChunk, Attempt: attempt, Chunk: sse.Finish, Finished: 1 << choice}
}

// A keyed request records its boundary durably before anything crosses it: the event that
// would cross waits for the answer.
func TestDurableBoundaryRecordedBeforeTheWrite(t *testing.T) {
	cfg := streamCfg()
	cfg.DurableBoundary = true
	s := started(t, cfg, false)
	expectKinds(t, s.step(chunk(1, roleOnly)), "hold(1)")
	expectKinds(t, s.step(chunk(1, output)), "record-boundary(1)")
	if s.m.Committed() {
		t.Fatal("latched before the boundary was recorded")
	}
	expectKinds(t, s.step(Event{Kind: EvBoundaryRecorded}), "headers mark-first-delta(1) write-held(1) write(1)")
	// Later output needs no record.
	expectKinds(t, s.step(chunk(1, output)), "write(1)")
}

// When the boundary cannot be recorded, nothing is delivered and the request fails before
// output: another gateway may already own it.
func TestDurableBoundaryFailureDeliversNothing(t *testing.T) {
	cfg := streamCfg()
	cfg.DurableBoundary = true
	s := started(t, cfg, false)
	s.step(chunk(1, roleOnly))
	s.step(chunk(1, output))
	acts := s.step(Event{Kind: EvBoundaryRecorded, Reason: "request_ownership_lost",
		Err: &openai.Error{Status: 503, Code: "request_ownership_lost", Message: "x"}})
	expectKinds(t, acts, "cancel(1) discard-held(1) fail")
	if s.m.Outcome() != Failed || *acts[2].Err.PartialOutput || s.publisher != 0 {
		t.Fatalf("outcome %v err %+v", s.m.Outcome(), acts[2].Err)
	}
}

// Several choices: the stream is complete only when every one finished. A [DONE] or an EOF
// before that is a cut answer.
func TestEveryChoiceMustFinish(t *testing.T) {
	cfg := streamCfg()
	cfg.Choices = 2
	s := started(t, cfg, false)
	s.step(chunk(1, output))
	s.step(finishChoice(1, 0))
	acts := s.step(Event{Kind: EvEnd, Attempt: 1})
	if last := acts[len(acts)-1]; last.Kind != ActFail || last.Err.Code != "upstream_decode_interrupted" {
		t.Fatalf("EOF after one of two choices finished: %s", kinds(acts))
	}

	s = started(t, cfg, false)
	s.step(chunk(1, output))
	s.step(finishChoice(1, 1))
	acts = s.step(chunk(1, done))
	if last := acts[len(acts)-1]; last.Kind != ActFail || s.m.Attempts()[0].EndReason != "done_before_finish" {
		t.Fatalf("[DONE] after one of two choices finished: %s", kinds(acts))
	}

	s = started(t, cfg, false)
	s.step(chunk(1, output))
	s.step(finishChoice(1, 1))
	s.step(finishChoice(1, 1)) // the same choice twice does not finish the other
	if s.m.AllFinished() {
		t.Fatal("one choice finished twice counted as two")
	}
	s.step(finishChoice(1, 0))
	expectKinds(t, s.step(Event{Kind: EvEnd, Attempt: 1}), "end(1) finish")
}

// Choices beyond 64 are counted rather than kept as bits.
func TestManyChoices(t *testing.T) {
	cfg := streamCfg()
	cfg.Choices = 66
	s := started(t, cfg, false)
	s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Output | sse.Finish, Finished: ^uint64(0), FinishedHigh: 1})
	if s.m.AllFinished() {
		t.Fatal("65 of 66 choices counted as all")
	}
	s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Finish, FinishedHigh: 1})
	expectKinds(t, s.step(chunk(1, done)), "write(1) end(1) finish")
}

// An engine error event ends the attempt only when the engine ends its stream; before the
// boundary that proves it stopped, so the request is rerun.
func TestEngineErrorEventThenDoneIsDead(t *testing.T) {
	s := started(t, streamCfg(), false)
	s.step(chunk(1, roleOnly))
	engineErr := &openai.Error{Status: 500, Type: "InternalServerError", Code: "500", Message: "CUDA error"}
	expectKinds(t, s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Error, Err: engineErr}), "")
	expectKinds(t, s.step(chunk(1, output)), "") // nothing after an error is delivered
	expectKinds(t, s.step(chunk(1, done)), "cancel(1) discard-held(1) start(2)")
	if a := s.m.Attempts()[0]; a.Failure != Dead || a.EndReason != "engine_error_event" {
		t.Fatalf("attempt %+v", a)
	}
}

// An engine error event followed by silence: the gateway closes the stream at the end of
// the grace, which proves nothing, so in direct mode the request is not rerun and the
// client gets the engine's error.
func TestEngineErrorEventWithoutEndIsUncertain(t *testing.T) {
	cfg := streamCfg()
	cfg.Keepalive = 0
	s := started(t, cfg, false)
	engineErr := &openai.Error{Status: 500, Type: "InternalServerError", Code: "500", Message: "CUDA error"}
	s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Error, Err: engineErr})
	if d := s.m.Deadline(); !d.Equal(s.now.Add(DefaultEndGrace)) {
		t.Fatalf("deadline %v, want the end grace", d)
	}
	acts := s.tickUntilDeadline()
	expectKinds(t, acts, "cancel(1) fail")
	if e := acts[1].Err; e.Message != "CUDA error" || !*e.Retryable || s.m.Attempts()[0].Failure != Uncertain {
		t.Fatalf("error %+v attempt %+v", e, s.m.Attempts()[0])
	}
	// With an agent, the same attempt is fenced and then rerun.
	s = started(t, cfg, true)
	s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Error, Err: engineErr})
	acts = s.tickUntilDeadline()
	if kinds(acts) != "cancel(1)" || !acts[0].AwaitFence {
		t.Fatalf("fenced mode: %s", kinds(acts))
	}
	expectKinds(t, s.step(Event{Kind: EvFenced, Attempt: 1}), "start(2)")
}

// A stream the gateway cannot read is closed by the gateway: uncertain, not rerun without
// an agent.
func TestProtocolViolationsAreUncertain(t *testing.T) {
	cfg := streamCfg()
	cfg.Keepalive = 0
	cfg.MaxHeldBytes = 100
	for _, tc := range []struct {
		name   string
		ev     Event
		reason EndReason
	}{
		{"malformed", Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Malformed}, "malformed_event"},
		{"held too large", Event{Kind: EvChunk, Attempt: 1, Chunk: roleOnly, Size: 101}, "held_events_too_large"},
		{"event too large", Event{Kind: EvFailed, Attempt: 1, Failure: Uncertain, Reason: "event_too_large"}, "event_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := started(t, cfg, false)
			acts := s.step(tc.ev)
			last := acts[len(acts)-1]
			if last.Kind != ActFail || last.Err.Code != "upstream_protocol_error" || last.Err.Status != 502 || len(s.started) != 1 {
				t.Fatalf("got %s %+v", kinds(acts), last.Err)
			}
			if a := s.m.Attempts()[0]; a.Failure != Uncertain || a.EndReason != tc.reason {
				t.Fatalf("attempt %+v", a)
			}
		})
	}
}

// max_request_duration ends the request whatever it is doing; after the boundary it is an
// interruption with partial output.
func TestMaxRequestDuration(t *testing.T) {
	cfg := streamCfg()
	cfg.MaxDuration = 90 * time.Second
	cfg.Keepalive = 0
	s := started(t, cfg, false)
	s.step(chunk(1, output))
	for i := 0; i < 3; i++ {
		s.advance(25 * time.Second)
		s.step(chunk(1, output))
	}
	if d := s.m.Deadline(); !d.Equal(s.m.started.Add(90 * time.Second)) {
		t.Fatalf("deadline %v", d)
	}
	acts := s.tickUntilDeadline()
	expectKinds(t, acts, "cancel(1) fail")
	if e := acts[1].Err; e.Code != "request_timeout" || e.Status != 504 || !*e.PartialOutput || *e.DeliveredOutputTokens != 4 || !acts[1].AsEvent {
		t.Fatalf("error %+v", e)
	}
	if s.m.Outcome() != Interrupted {
		t.Fatalf("outcome %v", s.m.Outcome())
	}
}

// A client that stops reading is gone: its attempt is cancelled, nothing is rerun, and
// the outcome says it stalled.
func TestClientStalled(t *testing.T) {
	s := started(t, streamCfg(), false)
	s.step(chunk(1, output))
	expectKinds(t, s.step(Event{Kind: EvClientGone, Stalled: true}), "cancel(1) finish")
	if s.m.Outcome() != ClientStalled || s.m.Attempts()[0].EndReason != "client_stalled" {
		t.Fatalf("outcome %v attempt %+v", s.m.Outcome(), s.m.Attempts()[0])
	}
}

// An end that is also the finish (the Responses API's response.completed) completes the
// stream in one event; it crosses the boundary when nothing was delivered before.
func TestFinishAndDoneInOneEvent(t *testing.T) {
	s := started(t, streamCfg(), false)
	s.step(chunk(1, roleOnly))
	expectKinds(t, s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Finish | sse.Done, Finished: 1}),
		"headers mark-first-delta(1) write-held(1) write(1) end(1) finish")
	if s.m.Outcome() != Completed {
		t.Fatalf("outcome %v", s.m.Outcome())
	}
}

// The end event's tokens count: response.completed carries the answer's usage, which makes
// the one token per delta counted before it exact (here 2 deltas of an answer of 9 tokens).
func TestEndEventTokensCount(t *testing.T) {
	s := started(t, streamCfg(), false)
	s.step(chunk(1, output))
	s.step(chunk(1, output))
	expectKinds(t, s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Finish | sse.Done, Finished: 1, Tokens: 7}),
		"write(1) end(1) finish")
	if s.m.Outcome() != Completed || s.m.Delivered() != 9 {
		t.Fatalf("outcome %v delivered %d, want 9", s.m.Outcome(), s.m.Delivered())
	}
}

// The same when the end is the first output, with a durable boundary: the event is parked
// until the boundary is recorded and its tokens counted once.
func TestEndEventTokensCountOnceAfterDurableBoundary(t *testing.T) {
	cfg := streamCfg()
	cfg.DurableBoundary = true
	s := started(t, cfg, false)
	expectKinds(t, s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Finish | sse.Done, Finished: 1, Tokens: 5}),
		"record-boundary(1)")
	s.step(Event{Kind: EvBoundaryRecorded})
	if s.m.Outcome() != Completed || s.m.Delivered() != 5 {
		t.Fatalf("outcome %v delivered %d, want 5", s.m.Outcome(), s.m.Delivered())
	}
}
