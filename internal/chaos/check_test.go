package chaos

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// Crafted histories: each breaks one rule of the contract, and the checker must name it. A
// clean history of the same shape must pass, so that each failure is the rule's own.

const testID = "req_01TESTTESTTESTTESTTESTTEST"

// roleEvent, textEvent, finishEvent and usageEvent render chat stream events as the
// gateway forwards them.
func roleEvent(choice int) string {
	return fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":%d,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, choice)
}

func textEvent(choice int, text string) string {
	return fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":%d,"delta":{"content":%q},"finish_reason":null}]}`, choice, text)
}

func finishEvent(choice int) string {
	return fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":%d,"delta":{},"finish_reason":"length"}]}`, choice)
}

func interruptionEvent(delivered int) string {
	return fmt.Sprintf(`{"error":{"message":"generation interrupted","type":"upstream_error","param":null,"code":"upstream_decode_interrupted","request_id":%q,"partial_output":true,"delivered_output_tokens":%d,"retryable":false}}`,
		testID, delivered)
}

// sseBody joins events into the bytes a client reads.
func sseBody(events ...string) []byte {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return []byte(b.String())
}

// cleanHistory is a chat request (n choices, 4 tokens each) that sim-1 answered completely
// on its first attempt, delivered two tokens per chunk.
func cleanHistory(n int) *history {
	t0 := time.Now()
	r := &request{n: 1, endpoint: "chat", stream: true, prompts: []string{"p"}, choicesN: n, maxTokens: 4, continues: -1}
	h := &history{req: r, answers: map[string]answer{}, agentEnds: map[string]time.Time{}}
	var ans answer
	var events []string
	for c := range n {
		events = append(events, roleEvent(c))
	}
	for c := range n {
		words := []string{" alpha", " bravo", " charlie", " delta"}
		if c == 1 {
			words = []string{" echo", " golf", " hotel", " india"}
		}
		ans.choices = append(ans.choices, refChoice{text: strings.Join(words, ""), finish: "length"})
		events = append(events, textEvent(c, words[0]+words[1]), textEvent(c, words[2]+words[3]), finishEvent(c))
	}
	events = append(events, "[DONE]")
	h.answers["sim-1"] = ans
	r.seen = seen{status: http.StatusOK, requestID: testID, raw: sseBody(events...), sentAt: t0}
	r.seen.events, r.seen.comments = parseSSE(r.seen.raw)
	h.journal = journal{ID: testID, Phase: "done", Outcome: "completed", FirstDeltaSent: true, DeliveredOutputTokens: 4 * n,
		Attempts: []journalAttempt{{ID: testID + ".a1", Replica: "sim-1", StartedAt: t0, EndedAt: t0.Add(time.Second), EndReason: "completed"}}}
	h.records = []sim.Record{{ID: "chatcmpl-1", AttemptID: testID + ".a1", RequestID: testID, Outcome: sim.OutcomeFinished, Started: t0, Ended: t0.Add(time.Second)}}
	return h
}

// setEvents replaces what the client of h received.
func setEvents(h *history, events ...string) {
	h.req.seen.raw = sseBody(events...)
	h.req.seen.events, h.req.seen.comments = parseSSE(h.req.seen.raw)
}

// rules returns the rules judge says h breaks.
func rules(h *history) []string {
	_, vs := judge(h)
	var out []string
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

func requireRule(t *testing.T, h *history, rule string) {
	t.Helper()
	got := rules(h)
	for _, v := range got {
		if strings.HasPrefix(v, rule+": ") {
			return
		}
	}
	t.Errorf("the checker did not report %s; it reported %q", rule, got)
}

func TestCleanHistoriesPass(t *testing.T) {
	for _, n := range []int{1, 2} {
		if got := rules(cleanHistory(n)); len(got) > 0 {
			t.Errorf("n=%d: a clean history was reported: %q", n, got)
		}
	}
}

func TestCheckerReportsASplice(t *testing.T) {
	h := cleanHistory(1)
	// The second half comes from another replica's answer.
	setEvents(h, roleEvent(0), textEvent(0, " alpha bravo"), textEvent(0, " echo golf"), finishEvent(0), "[DONE]")
	requireRule(t, h, rSplice)
}

func TestCheckerReportsDoneAfterACutChoice(t *testing.T) {
	h := cleanHistory(2)
	// Choice 1 was cut after two tokens, and the stream still ends with [DONE].
	setEvents(h, roleEvent(0), roleEvent(1), textEvent(0, " alpha bravo"), textEvent(1, " echo golf"),
		textEvent(0, " charlie delta"), finishEvent(0), "[DONE]")
	h.journal.DeliveredOutputTokens = 6
	requireRule(t, h, rCutDone)
}

func TestCheckerReportsARerunAfterAnUncertainDirectFailure(t *testing.T) {
	h := cleanHistory(1)
	t0 := h.journal.Attempts[0].StartedAt
	// Attempt 1 went silent (idle timeout, uncertain): without an agent nothing proves it
	// stopped, yet attempt 2 ran.
	h.journal.Attempts = []journalAttempt{
		{ID: testID + ".a1", Replica: "sim-2", StartedAt: t0, EndedAt: t0.Add(time.Second), EndReason: "idle_timeout", Failure: "uncertain", CancelSent: true},
		{ID: testID + ".a2", Replica: "sim-1", StartedAt: t0.Add(time.Second), EndedAt: t0.Add(2 * time.Second), EndReason: "completed"},
	}
	h.records = []sim.Record{
		{ID: "chatcmpl-2", AttemptID: testID + ".a1", RequestID: testID, Outcome: sim.OutcomeHung, Started: t0, Ended: t0.Add(time.Second)},
		{ID: "chatcmpl-1", AttemptID: testID + ".a2", RequestID: testID, Outcome: sim.OutcomeFinished, Started: t0.Add(time.Second), Ended: t0.Add(2 * time.Second)},
	}
	h.answers["sim-2"] = answer{choices: []refChoice{{text: " echo golf hotel india", finish: "length"}}}
	requireRule(t, h, rUncertainRerun)
	// The same history is sound in fenced mode when the agent ended attempt 1 first.
	h.fenced = true
	h.agentEnds[testID+".a1"] = t0.Add(time.Second - time.Millisecond)
	if got := rules(h); len(got) > 0 {
		t.Errorf("a fenced rerun after the agent ended the first attempt was reported: %q", got)
	}
	// ... but not when the rerun started before the agent had ended it.
	h.agentEnds[testID+".a1"] = t0.Add(time.Second + time.Millisecond)
	requireRule(t, h, rOverlap)
}

func TestCheckerReportsASilentEngineCalledDead(t *testing.T) {
	h := cleanHistory(1)
	setEvents(h)
	h.req.seen.status = http.StatusBadGateway
	h.req.seen.raw = []byte(`{"error":{"message":"replica sim-1 failed","type":"upstream_error","param":null,"code":"upstream_unavailable"}}`)
	h.journal.Outcome, h.journal.FirstDeltaSent, h.journal.DeliveredOutputTokens = "failed", false, 0
	// The engine wrote a malformed event and went silent; the gateway called it dead.
	h.journal.Attempts[0].EndReason, h.journal.Attempts[0].Failure = "malformed_event", "dead"
	h.records[0].Outcome = sim.OutcomeGarbage
	requireRule(t, h, rClass)
	// Called uncertain, the client must hear that the stream could not be read.
	h.journal.Attempts[0].Failure = "uncertain"
	requireRule(t, h, rClass)
	h.req.seen.raw = []byte(`{"error":{"message":"replica sim-1 sent a stream the gateway cannot forward","type":"upstream_error","param":null,"code":"upstream_protocol_error"}}`)
	if got := rules(h); len(got) > 0 {
		t.Errorf("an uncertain malformed stream answered upstream_protocol_error was reported: %q", got)
	}
}

func TestCheckerReportsChunksCountedAsTokens(t *testing.T) {
	h := cleanHistory(1)
	// Two chunks of two tokens each: a count of chunks says 2.
	h.journal.DeliveredOutputTokens = 2
	requireRule(t, h, rTokens)

	h = cleanHistory(1)
	setEvents(h, roleEvent(0), textEvent(0, " alpha bravo"), textEvent(0, " charlie"), interruptionEvent(2))
	h.journal.Outcome, h.journal.DeliveredOutputTokens = "interrupted", 3
	requireRule(t, h, rTokens)
}

func TestCheckerReportsAReplayThatDiffers(t *testing.T) {
	h := cleanHistory(1)
	h.req.key = "k"
	retry := h.req.seen
	retry.replayed, retry.sentAt = true, time.Now()
	h.req.retry = &retry
	if got := rules(h); len(got) > 0 {
		t.Fatalf("an identical replay was reported: %q", got)
	}
	different := retry
	different.raw = sseBody(roleEvent(0), textEvent(0, " alpha bravo charlie delta"), finishEvent(0), "[DONE]")
	different.events, _ = parseSSE(different.raw)
	h.req.retry = &different
	requireRule(t, h, rReplay)
}

func TestCheckerReportsARerunForARetry(t *testing.T) {
	h := cleanHistory(1)
	h.req.key = "k"
	retry := h.req.seen
	retry.replayed, retry.sentAt = true, h.records[0].Started.Add(-time.Millisecond)
	h.req.retry = &retry
	requireRule(t, h, rRerunOnRetry)
}

func TestCheckerReportsAnOutcomeNotDurableAtTheEnd(t *testing.T) {
	h := cleanHistory(1)
	h.req.key = "k"
	busy := seen{status: http.StatusConflict, requestID: testID, sentAt: time.Now(),
		raw: []byte(`{"error":{"message":"in progress","type":"invalid_request_error","param":null,"code":"idempotency_key_in_use"}}`)}
	h.req.retry = &busy
	requireRule(t, h, rDurable)
}

func TestCheckerReportsAStalledClientsRequestNotCancelled(t *testing.T) {
	h := cleanHistory(1)
	h.req.client = clientStall
	setEvents(h, roleEvent(0), textEvent(0, " alpha bravo"))
	h.req.seen.stalled, h.req.seen.stallEnded = true, true
	// The gateway let the engine finish and called it completed.
	requireRule(t, h, rStall)

	h.journal.Outcome = "client_stalled"
	h.journal.Attempts[0].EndReason, h.journal.Attempts[0].CancelSent = "client_stalled", true
	h.records[0].Outcome = sim.OutcomeCancelled
	if got := rules(h); len(got) > 0 {
		t.Errorf("a stalled client's request cancelled for client_stalled was reported: %q", got)
	}
	// The engine went on after the gateway gave up on the client: it was never cancelled.
	end := h.journal.Attempts[0].EndedAt
	h.records[0].Outcome, h.records[0].Ended = sim.OutcomeFinished, end.Add(time.Second)
	requireRule(t, h, rStall)
	// Had it finished before, there was nothing left to cancel.
	h.records[0].Ended = end.Add(-time.Second)
	if got := rules(h); len(got) > 0 {
		t.Errorf("a stall after the engine had finished was reported: %q", got)
	}
	// Declared stalled 100ms after the client stopped reading, with a 600ms write timeout.
	h.writeTimeout = 600 * time.Millisecond
	h.req.seen.stoppedAt = h.journal.Attempts[0].EndedAt.Add(-100 * time.Millisecond)
	requireRule(t, h, rStall)
	h.req.seen.stoppedAt = h.journal.Attempts[0].EndedAt.Add(-700 * time.Millisecond)
	if got := rules(h); len(got) > 0 {
		t.Errorf("a stall declared 700ms after the client stopped was reported: %q", got)
	}
	h.req.seen.stallEnded = false
	requireRule(t, h, rStall)
}

func TestCheckerReportsAStalledKeyedRequestReplayedAsAnythingButCancelled(t *testing.T) {
	h := cleanHistory(1)
	h.req.client, h.req.key = clientStall, "k"
	setEvents(h, roleEvent(0), textEvent(0, " alpha bravo"))
	h.req.seen.stalled, h.req.seen.stallEnded = true, true
	h.journal.Outcome = "client_stalled"
	h.journal.Attempts[0].EndReason, h.journal.Attempts[0].CancelSent = "client_stalled", true
	h.records[0].Outcome = sim.OutcomeCancelled
	answer := func(code string) *seen {
		return &seen{status: http.StatusConflict, requestID: testID, replayed: true, sentAt: time.Now(),
			raw: []byte(`{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"` + code + `"}}`)}
	}
	h.req.retry = answer("idempotency_key_cancelled")
	if got := rules(h); len(got) > 0 {
		t.Fatalf("a stalled keyed request replayed as cancelled was reported: %q", got)
	}
	// Its client was treated as gone: the key's request was cancelled, not too large to keep.
	h.req.retry = answer("replay_unavailable")
	requireRule(t, h, rReplay)
}

func TestCheckerReportsUsageTheClientDidNotAskFor(t *testing.T) {
	h := cleanHistory(1)
	setEvents(h, roleEvent(0), textEvent(0, " alpha bravo"), textEvent(0, " charlie delta"), finishEvent(0),
		`{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, "[DONE]")
	requireRule(t, h, rUsage)
}

func TestCheckerReportsAZombieAndAnUnknownAttempt(t *testing.T) {
	h := cleanHistory(1)
	h.records = append(h.records, sim.Record{ID: "chatcmpl-9", AttemptID: testID + ".a7", RequestID: testID, Started: time.Now()})
	requireRule(t, h, rZombie)
	requireRule(t, h, rUnknownAttempt)
}

func TestCheckerReportsSilentTruncation(t *testing.T) {
	h := cleanHistory(1)
	setEvents(h, roleEvent(0), textEvent(0, " alpha bravo"))
	requireRule(t, h, rTruncation)
}

func TestTokensAreCountedAsTheSimCutsThem(t *testing.T) {
	for text, want := range map[string]int{"": 0, " alpha": 1, " alpha bravo charlie": 3} {
		if got := words(text); got != want {
			t.Errorf("words(%q) = %d, want %d", text, got, want)
		}
	}
	for args, want := range map[string]int{`{"city": "red blue", "days": 42}`: 12, `{"`: 1, `{"city`: 2} {
		if got := argumentTokens(args); got != want {
			t.Errorf("argumentTokens(%q) = %d, want %d", args, got, want)
		}
	}
}

// An engine-run tool that ran twice for one request breaks its own rule, whatever else
// the history says; once it ran, the client's error must say so and not be retryable.
func TestCheckerReportsAToolRunTwice(t *testing.T) {
	h := cleanHistory(1)
	h.req.engineTool, h.toolCalls = true, 1
	if got := rules(h); len(got) > 0 {
		t.Errorf("a request whose tool ran once was reported: %q", got)
	}
	h.toolCalls = 2
	requireRule(t, h, rToolTwice)
	h.req.engineTool, h.toolCalls = false, 1
	requireRule(t, h, rToolTwice)

	// The tool ran, then the attempt failed and the client got an error that invites a retry.
	h = cleanHistory(1)
	setEvents(h)
	h.req.engineTool, h.toolCalls = true, 1
	h.req.seen.status = http.StatusBadGateway
	h.journal.Outcome, h.journal.FirstDeltaSent, h.journal.DeliveredOutputTokens = "failed", false, 0
	h.journal.Attempts[0].EndReason, h.journal.Attempts[0].Failure = "connection_reset", "dead"
	h.records[0].Outcome = sim.OutcomeReset
	h.req.seen.raw = []byte(`{"error":{"message":"replica sim-1 failed","type":"upstream_error","param":null,"code":"upstream_unavailable","retryable":true}}`)
	requireRule(t, h, rClass)
	h.req.seen.raw = []byte(`{"error":{"message":"a tool may have run","type":"upstream_error","param":null,"code":"upstream_failed_after_tool_use","retryable":false}}`)
	if got := rules(h); len(got) > 0 {
		t.Errorf("the honest error was reported: %q", got)
	}
}
