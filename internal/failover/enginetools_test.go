package failover

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/openai"
)

// A request whose engine runs tools itself (docs/design.md §5) is rerun only after a failure
// that proves the engine never started it: every other failure, in direct and fenced mode
// alike, ends it with upstream_failed_after_tool_use, retryable false.
func TestEngineToolsPolicy(t *testing.T) {
	engine500 := &openai.Error{Status: 500, Type: "server_error", Code: "InternalServerError", Message: "generation failed"}
	engine503 := &openai.Error{Status: 503, Type: "server_error", Code: "busy", Message: "busy"}
	engine429 := &openai.Error{Status: 429, Type: "rate_limit_error", Code: "busy", Message: "busy"}
	engine400 := &openai.Error{Status: 400, Type: "invalid_request_error", Code: "bad", Message: "tool failed"}
	cases := []struct {
		name      string
		stream    bool
		fence     bool
		ev        Event
		wantRerun bool
		wantCode  string
		acted     bool // the attempt records that the engine may have acted
	}{
		{"refused dial reruns", true, false, Event{Failure: Dead, Reason: "connection_refused", Dial: true}, true, "", false},
		{"a stream's 429 status reruns", true, false, Event{Failure: Overloaded, Reason: "engine_status_429", Status: 429, Err: engine429}, true, "", false},
		{"a stream's 503 status reruns", true, false, Event{Failure: Overloaded, Reason: "engine_status_503", Status: 503, Err: engine503}, true, "", false},
		{"a stream's 500 status reruns", true, false, Event{Failure: Dead, Reason: "engine_status_500", Status: 500, Err: engine500}, true, "", false},
		{"a whole answer's 429 may follow the tool", false, false, Event{Failure: Overloaded, Reason: "engine_status_429", Status: 429, Err: engine429}, false, "upstream_failed_after_tool_use", true},
		{"a whole answer's 503 may follow the tool", false, false, Event{Failure: Overloaded, Reason: "engine_status_503", Status: 503, Err: engine503}, false, "upstream_failed_after_tool_use", true},
		{"a whole answer's 500 may follow the tool", false, false, Event{Failure: Dead, Reason: "engine_status_500", Status: 500, Err: engine500}, false, "upstream_failed_after_tool_use", true},
		{"a whole answer's 400 may follow the tool", false, false, Event{Failure: Rejected, Reason: "engine_status_400", Status: 400, Err: engine400}, false, "bad", true},
		{"reset", true, false, Event{Failure: Dead, Reason: "connection_reset"}, false, "upstream_failed_after_tool_use", true},
		{"reset of a whole answer", false, false, Event{Failure: Dead, Reason: "connection_reset"}, false, "upstream_failed_after_tool_use", true},
		{"closed", true, false, Event{Failure: Dead, Reason: "connection_closed"}, false, "upstream_failed_after_tool_use", true},
		{"timeout, direct mode", true, false, Event{Failure: Uncertain, Reason: "first_token_timeout"}, false, "upstream_failed_after_tool_use", true},
		{"timeout, fenced mode", true, true, Event{Failure: Uncertain, Reason: "first_token_timeout"}, false, "upstream_failed_after_tool_use", true},
		{"reset, fenced mode", false, true, Event{Failure: Dead, Reason: "connection_reset"}, false, "upstream_failed_after_tool_use", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := streamCfg()
			cfg.Stream, cfg.Keepalive, cfg.MaxAttempts = c.stream, 0, 3
			cfg.EngineTools = []string{"mcp"}
			s := newShell(t, cfg)
			s.step(Event{Kind: EvStart})
			s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a", Fenceable: c.fence})
			ev := c.ev
			ev.Kind, ev.Attempt = EvFailed, 1
			acts := s.step(ev)
			if acts[0].Kind != ActEndAttempt || acts[0].AwaitFence {
				t.Fatalf("first action %+v: the attempt ends at once, with no wait for a fence", acts[0])
			}
			if a := s.m.Attempts()[0]; a.EngineMayHaveActed != c.acted {
				t.Fatalf("attempt %+v, want engine_may_have_acted %v", a, c.acted)
			}
			last := acts[len(acts)-1]
			if c.wantRerun {
				if last.Kind != ActStartAttempt || !last.Rerun {
					t.Fatalf("want a rerun, got %s", kinds(acts))
				}
				return
			}
			e := last.Err
			if last.Kind != ActFail || e.Code != c.wantCode || *e.Retryable || *e.PartialOutput || len(s.started) != 1 {
				t.Fatalf("got %s err %+v", kinds(acts), e)
			}
			if c.wantCode == "upstream_failed_after_tool_use" &&
				(e.Status != 502 || e.Type != "upstream_error" || !strings.Contains(e.Message, "a tool may have run") ||
					!strings.Contains(e.Message, "(mcp)") || !strings.Contains(e.Message, string(c.ev.Reason))) {
				t.Fatalf("error %+v", e)
			}
		})
	}
}

// After the boundary (a tool's call item was delivered) the error is the same code, with
// partial_output true.
func TestEngineToolsAfterBoundary(t *testing.T) {
	cfg := streamCfg()
	cfg.EngineTools = []string{"code_interpreter", "web_search_preview"}
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, roleOnly))
	s.step(chunk(1, output))
	acts := s.step(failed(1, Dead, "connection_reset"))
	e := acts[len(acts)-1].Err
	if e.Code != "upstream_failed_after_tool_use" || !*e.PartialOutput || *e.Retryable || *e.DeliveredOutputTokens != 1 ||
		!strings.Contains(e.Message, "code_interpreter, web_search_preview") || !strings.Contains(e.Message, "after part of the answer was sent") {
		t.Fatalf("error %+v", e)
	}
	if s.m.Outcome() != Interrupted {
		t.Fatalf("outcome %v", s.m.Outcome())
	}
}

// Tools the operator declared idempotent are rerun as any request's, and the attempt still
// records that the engine may have acted.
func TestEngineToolsDeclaredIdempotent(t *testing.T) {
	cfg := streamCfg()
	cfg.EngineTools, cfg.RerunEngineTools = []string{"mcp"}, true
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	expectKinds(t, s.step(failed(1, Dead, "connection_reset")), "cancel(1) start(2)")
	if !s.m.Attempts()[0].EngineMayHaveActed {
		t.Fatalf("attempt %+v", s.m.Attempts()[0])
	}
	s.step(Event{Kind: EvDispatched, Attempt: 2, Replica: "b"})
	acts := s.step(failed(2, Dead, "connection_reset"))
	if e := acts[len(acts)-1].Err; e.Code != "upstream_unavailable" || !*e.Retryable {
		t.Fatalf("error %+v", e)
	}
}

// A completed attempt reached its engine: it records that the engine may have acted. One
// that ended with the client's leaving does too.
func TestEngineToolsAttemptRecords(t *testing.T) {
	cfg := streamCfg()
	cfg.EngineTools = []string{"mcp"}
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(chunk(1, output|finish))
	s.step(chunk(1, done))
	if s.m.Outcome() != Completed || !s.m.Attempts()[0].EngineMayHaveActed {
		t.Fatalf("outcome %v attempt %+v", s.m.Outcome(), s.m.Attempts()[0])
	}
	s = newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(Event{Kind: EvClientGone})
	if !s.m.Attempts()[0].EngineMayHaveActed {
		t.Fatalf("attempt %+v", s.m.Attempts()[0])
	}
	// Without engine tools nothing is recorded.
	s = newShell(t, streamCfg())
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	s.step(failed(1, Dead, "connection_reset"))
	if s.m.Attempts()[0].EngineMayHaveActed {
		t.Fatalf("attempt %+v", s.m.Attempts()[0])
	}
}

// After a dial failure the rerun's own failure is judged alone, and the request that ends
// with no replica left is retryable: nothing acted.
func TestEngineToolsDialThenNoReplica(t *testing.T) {
	cfg := streamCfg()
	cfg.EngineTools = []string{"mcp"}
	s := newShell(t, cfg)
	s.step(Event{Kind: EvStart})
	s.step(Event{Kind: EvDispatched, Attempt: 1, Replica: "a"})
	expectKinds(t, s.step(Event{Kind: EvFailed, Attempt: 1, Failure: Dead, Reason: "connection_refused", Dial: true}), "cancel(1) start(2)")
	acts := s.step(Event{Kind: EvNoReplica, Attempt: 2})
	if e := acts[len(acts)-1].Err; e.Code != "no_healthy_replica" || !*e.Retryable {
		t.Fatalf("error %+v", e)
	}
}
