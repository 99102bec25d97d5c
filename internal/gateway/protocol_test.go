package gateway_test

import (
	"errors"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/openai/openai-go/v3"
)

// What an engine's broken or failing stream does to a request, before any output was
// delivered. An engine error event followed by the end of its stream proves the engine
// stopped (dead: rerun). A stream the gateway cannot read (a malformed event, an event
// over 4 MiB) must be closed by the gateway, which proves nothing: without an agent the
// request is not rerun, and the client is told why.
//
// Behind an agent, an event too large to hold is the agent's to refuse: it aborts the
// engine request and ends the gateway's stream, a proven death.
var protocolCases = []struct {
	fault    string
	failure  string
	reason   string
	code     string // the client's error in direct mode when not rerun
	directOK bool   // rerun (and answered) in direct mode
	// fenced is the first attempt's failure and reason behind an agent, when they differ.
	fencedFailure, fencedReason string
}{
	{"error@prefill", "dead", "engine_error_event", "", true, "", ""},
	{"error:nodone@prefill", "dead", "engine_error_event", "", true, "", ""},
	{"garbage@prefill", "uncertain", "malformed_event", "upstream_protocol_error", false, "", ""},
	{"oversize@prefill", "uncertain", "event_too_large", "upstream_protocol_error", false, "dead", "connection_closed"},
}

func TestBrokenStreamsDirectMode(t *testing.T) {
	for _, tc := range protocolCases {
		t.Run(tc.fault, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.armAll(tc.fault)
			r := e.stream(testCtx(t), chatParams("broken "+tc.fault, 6))
			rec := e.record(r.requestID)
			if len(rec.Attempts) == 0 || rec.Attempts[0].Failure != tc.failure || rec.Attempts[0].EndReason != tc.reason {
				t.Fatalf("journal %+v", rec)
			}
			if tc.directOK {
				// Both replicas were armed: the rerun meets the same fault, and the second
				// proven death ends the request with the engine's error (max_attempts 2).
				if len(rec.Attempts) != 2 || rec.Attempts[1].Failure != "dead" {
					t.Fatalf("a proven death must be rerun: %+v", rec)
				}
				return
			}
			var apiErr *openai.Error
			if !errors.As(r.err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Code != tc.code {
				t.Fatalf("client got %v", r.err)
			}
			if len(rec.Attempts) != 1 || e.totalSimRequests() != 1 || rec.Outcome != "failed" {
				t.Fatalf("rerun without proof that the engine stopped: %+v (engine requests %d)", rec, e.totalSimRequests())
			}
		})
	}
}

// With an agent, the gateway can prove the attempt stopped (the agent aborts it), so every
// one of these is rerun and the client gets the other replica's complete answer.
func TestBrokenStreamsFencedMode(t *testing.T) {
	for _, tc := range protocolCases {
		t.Run(tc.fault, func(t *testing.T) {
			// sim-1 serves first (a lower tier), so the first attempt meets the fault.
			f := newFencedEnvWith(t, fencedOptions{config: func(c *config.Config) { c.Models[0].Replicas[1].Priority = 1 }})
			if err := f.sims[0].ArmFault(tc.fault, 1); err != nil {
				t.Fatal(err)
			}
			p := chatParams("fenced broken "+tc.fault, 6)
			r := f.stream(testCtx(t), p)
			rec := f.record(r.requestID)
			failure, reason := tc.failure, tc.reason
			if tc.fencedFailure != "" {
				failure, reason = tc.fencedFailure, tc.fencedReason
			}
			if r.err != nil || rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[0].Replica != "sim-1" ||
				rec.Attempts[0].Failure != failure || rec.Attempts[0].EndReason != reason {
				t.Fatalf("stream %v, journal %+v", r.err, rec)
			}
			if want := f.direct(1, p); r.content != want {
				t.Fatalf("client saw %q, want %q", r.content, want)
			}
			// An uncertain attempt is rerun only once its agent ended it; a dead one (the
			// engine ended its own stream) needs no such wait.
			if info := f.agentAttempt(0, rec.Attempts[0].ID); !info.Ended || (failure == "uncertain" && info.EndedAt.After(rec.Attempts[1].StartedAt)) {
				t.Fatalf("the first attempt ended on its agent at %v, after the rerun started at %v", info.EndedAt, rec.Attempts[1].StartedAt)
			}
		})
	}
}
