package gateway_test

import (
	"testing"
	"time"
)

// The journal keeps when the first output reached the client for every request, not only
// for one with an Idempotency-Key (whose crossing is written synchronously): GET
// /v1/requests/{id} shows it, and the console draws the boundary from it without a trace.
// A request that failed before any output has none.
func TestJournalKeepsFirstDeltaAtOfEveryRequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	before := time.Now()
	r := e.stream(testCtx(t), chatParams("when did it start?", 4))
	if r.err != nil {
		t.Fatal(r.err)
	}
	rec := e.record(r.requestID)
	if !rec.FirstDeltaSent || rec.FirstDeltaAt.Before(before) || rec.FirstDeltaAt.After(time.Now()) {
		t.Fatalf("plain request: first_delta_sent %v, first_delta_at %v; want the time its first token was written",
			rec.FirstDeltaSent, rec.FirstDeltaAt)
	}
	e.armAll("status:500@accept")
	failed := e.stream(testCtx(t), chatParams("nothing comes", 4))
	if failed.err == nil {
		t.Fatal("the request with every replica failing succeeded")
	}
	if id := failed.requestID; id != "" {
		if rec := e.record(id); rec.FirstDeltaSent || !rec.FirstDeltaAt.IsZero() {
			t.Fatalf("failed request: first_delta_sent %v, first_delta_at %v; want neither", rec.FirstDeltaSent, rec.FirstDeltaAt)
		}
	}
}
