package gateway_test

import (
	"net/http"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3/option"
)

// The engine sees exactly the attempts the journal shows. An engine that dies having read
// a request (it closes a kept-alive connection without answering) must not be sent that
// request again by the HTTP client behind the machine's back: the attempts' client never
// resends a request, and Idempotency-Key and X-Idempotency-Key, with which Go's transport
// would resend a POST on a new connection, are stripped before the request goes out.
func TestNoTransportLevelReplay(t *testing.T) {
	e := newEnv(t, envOptions{})
	// Kept-alive connections to both replicas, so the next request reuses one.
	for i := 0; i < 4; i++ {
		if r := e.stream(testCtx(t), chatParams("warm up", 3)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	e.armAll("drop@accept")
	var resp *http.Response
	r := e.stream(testCtx(t), chatParams("dropped after reading", 6),
		option.WithHeader("Idempotency-Key", "no-replay-1"), option.WithHeader("X-Idempotency-Key", "no-replay-1"),
		option.WithResponseInto(&resp))
	if r.err == nil {
		t.Fatal("both replicas dropped the request, yet the client got an answer")
	}
	rec := e.record(r.requestID)
	seen := 0
	for i := range e.sims {
		got := e.simRequests(i, r.requestID)
		seen += len(got)
		for _, x := range got {
			if n := countAttempt(got, x.AttemptID); n != 1 {
				t.Fatalf("replica %d received attempt %s %d times", i, x.AttemptID, n)
			}
		}
	}
	if seen != len(rec.Attempts) || len(rec.Attempts) != 2 {
		t.Fatalf("engines saw %d requests, the journal shows %d attempts: %+v", seen, len(rec.Attempts), rec)
	}
	for _, a := range rec.Attempts {
		if a.Failure != "dead" || a.EndReason != "connection_closed" {
			t.Fatalf("attempt %+v", a)
		}
	}
}

func countAttempt(records []sim.Record, attempt string) int {
	n := 0
	for _, r := range records {
		if r.AttemptID == attempt {
			n++
		}
	}
	return n
}
