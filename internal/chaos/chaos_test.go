package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// knownBugs are bugs of the gateway and its agent that the seeded runs find, reported and
// not fixed yet (they are not this package's to fix). A violation that is one of them does
// not fail a run's test; the test is skipped instead, naming them, unless another
// violation or a missing ending fails it first. The chaos rules themselves stay as they
// are: once a bug is fixed, its findings stop and the test passes again.
var knownBugs = []struct {
	name string
	is   func(f Finding, fenced bool) bool
}{
	{
		"failover: Machine.chunk drops the tokens of an end event that is also the finish (the Responses API's response.completed), " +
			"so a streamed Responses answer from a replica that sends several tokens per event is journaled with one token per delta, " +
			"not its usage.output_tokens (one sim with --stream-interval 3, a streamed /v1/responses with max_output_tokens 9: " +
			"the journal says 4 delivered tokens, response.completed 9; fencegate chaos --requests 300 --seed 1 --partitions 4: request 45)",
		func(f Finding, _ bool) bool {
			return f.API == "responses/stream" && f.Rule == rTokens && (f.Outcome == "completed" || f.Outcome == "rerun-completed")
		},
	},
	{
		"agent: only /v1/chat/completions and /v1/completions are fenced; Messages, Responses and embeddings attempts pass " +
			"through without a lease, so a fenced rerun of one starts with no proof that the earlier attempt stopped " +
			"(a fenced /v1/messages or /v1/responses request never appears in the agent's attempts; " +
			"fencegate chaos --requests 300 --seed 1 --partitions 4 --fenced: request 139)",
		func(f Finding, fenced bool) bool {
			return fenced && f.Rule == rOverlap && !strings.HasPrefix(f.API, "chat/") && !strings.HasPrefix(f.API, "completions/")
		},
	},
	{
		"gateway: a keyed request's last bytes can reach the client before its outcome is durable: clientWriter.write passes a " +
			"write larger than the response writer's buffer (a whole answer over 4 KiB, such as two 384-dimension embeddings) " +
			"straight to the connection, before run.finish flushes the journal, so a retry sent as soon as the body is read " +
			"can get 409 idempotency_key_in_use (intermittent: fencegate chaos --requests 150 --seed 3 --partitions 3 --fenced: request 57)",
		func(f Finding, _ bool) bool { return f.Rule == rDurable && strings.HasSuffix(f.API, "/whole") },
	},
	{
		"gateway: after a rerun of a streamed Responses request the run keeps the failed attempt's response id (from its " +
			"discarded response.created): the journal pins that id, so a continuation of the response the client got runs on " +
			"any replica, and an interruption's response.failed names the discarded response (reset@prefill on the first " +
			"replica of a streamed /v1/responses, then previous_response_id of the answer: 404 from the first replica; " +
			"fencegate chaos --requests 300 --seed 1 --partitions 4 --fenced: request 248, continued by 266 and 267)",
		func(f Finding, _ bool) bool {
			return (f.Rule == rPinned && f.ContinuesStreamRerun) ||
				(f.API == "responses/stream" && f.Rule == rShape && f.Attempts > 1 && strings.HasPrefix(f.Text, "response.failed names response"))
		},
	},
}

// requireContract fails t for every violation of rep that is not a known bug, and skips
// it, naming the bugs, when known bugs are all it found.
func requireContract(t *testing.T, rep Report, fenced bool) {
	t.Helper()
	known := map[string]int{}
	for _, f := range rep.Found {
		bug := ""
		for _, b := range knownBugs {
			if b.is(f, fenced) {
				bug = b.name
				break
			}
		}
		if bug == "" {
			t.Error(f)
			continue
		}
		known[bug]++
	}
	if len(known) > 0 && !t.Failed() {
		var names []string
		for name, n := range known {
			names = append(names, fmt.Sprintf("%s: %d findings", name, n))
		}
		t.Skip("the run kept the contract but for known bugs:\n" + strings.Join(names, "\n"))
	}
}

// requireEveryAPI fails t unless every API completed requests in the run, and the
// continuations and the error:hang fault were exercised.
func requireEveryAPI(t *testing.T, rep Report) {
	t.Helper()
	for _, api := range []string{"chat/stream", "completions/stream", "messages/stream", "messages/whole", "responses/stream", "responses/whole", "embeddings/whole"} {
		if a := rep.ByAPI[api]; a == nil || a.Completed == 0 {
			t.Errorf("the run completed no %s request", api)
		}
	}
	for _, kind := range []string{"continues", "error:hang", "whole"} {
		if rep.ByKind[kind] == nil {
			t.Errorf("the run has no %s request", kind)
		}
	}
}

// A seeded chaos run: every history must keep the contract. The run is reproducible in its
// plan (which request, which API, which fault, where, on which replica, which client); the
// interleaving of concurrent requests is not, which is the point — the checker holds for
// any interleaving.
func TestChaosKeepsTheContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{Requests: 150, Concurrency: 8, Seed: 11, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s%s", rep, rep.APIs(), rep.Kinds())
	if rep.Completed == 0 || rep.Interrupted == 0 || rep.Failed == 0 || rep.Reruns == 0 || rep.Stalled == 0 || rep.Left == 0 {
		t.Errorf("the run did not exercise every ending: %s", rep)
	}
	requireEveryAPI(t, rep)
	requireContract(t, rep, false)
}

// The same in fenced mode, with gateway↔agent partitions: silent attempts are fenced and
// rerun, and the agents' records show every earlier attempt's engine request closed before
// the next attempt started.
func TestFencedChaosKeepsTheContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{Requests: 150, Concurrency: 8, Seed: 3, Fenced: true, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s%s", rep, rep.APIs(), rep.Kinds())
	if rep.Completed == 0 || rep.Reruns == 0 {
		t.Errorf("the run did not exercise reruns: %s", rep)
	}
	requireEveryAPI(t, rep)
	requireContract(t, rep, true)
}
