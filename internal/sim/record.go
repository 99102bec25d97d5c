package sim

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Record is what the replica knows about one generation request. Outcome is
// "" while the request runs and is set exactly once when it ends. A request
// with several choices (n > 1, or a completion prompt array) has one record:
// its token counts are totals over all choices, counted in the order the
// tokens were computed and written, and Choices says how many there are.
type Record struct {
	ID             string    `json:"id"`         // the reply's id: "chatcmpl-<hex>" (chat, messages), "cmpl-<hex>", "resp_<hex>" or "embd-<hex>"
	AttemptID      string    `json:"attempt_id"` // request header X-Fencegate-Attempt
	RequestID      string    `json:"request_id"` // request header X-Request-Id
	Endpoint       string    `json:"endpoint"`   // "chat", "completions", "messages", "responses" or "embeddings"
	Stream         bool      `json:"stream"`
	PromptTokens   int       `json:"prompt_tokens"`        // usage.prompt_tokens: a chat prompt once, a completion's or embedding's prompts summed
	Choices        int       `json:"choices"`              // output sequences: prompts × n (1 for a plain request); an embeddings request's inputs
	CachedTokens   int       `json:"cached_tokens"`        // prompt tokens found in the prefix cache, summed over the sequences
	TokensComputed int       `json:"tokens_computed"`      // output tokens generated so far, all choices together
	TokensSent     int       `json:"tokens_sent"`          // output tokens written and flushed to the client, all choices together
	ToolCalls      int       `json:"tool_calls,omitempty"` // calls of engine-run tools (--tool-server) that returned
	Fault          string    `json:"fault,omitempty"`      // the fault spec applied to this request
	Outcome        string    `json:"outcome"`              // "" while running, then one of the Outcome* values
	Started        time.Time `json:"started"`
	Ended          time.Time `json:"ended,omitzero"`
}

// Values of Record.Outcome.
const (
	OutcomeFinished  = "finished"   // the reply was completed
	OutcomeCancelled = "cancelled"  // the client went away
	OutcomeCrashed   = "crashed"    // the replica crashed (or was closed) while the request ran
	OutcomeReset     = "reset"      // a reset fault cut this connection
	OutcomeHung      = "hung"       // the request ended while a hang fault held it
	OutcomeError     = "error"      // an error reply or event: a status or error fault, or an invalid request
	OutcomeRejected  = "rejected"   // the waiting queue was full
	OutcomeGarbage   = "garbage"    // a garbage fault wrote a malformed event; ended when the client left
	OutcomeOversize  = "oversize"   // an oversize fault wrote an event over 4 MiB; ended when the client left
	OutcomeDropped   = "dropped"    // a drop fault closed the connection without a response (byte)
	OutcomeErrorHung = "error_hung" // an error:hang fault wrote its error event and held the stream open; ended when the client left
)

// recordBook keeps every request's record in arrival order and wakes
// waiters on every change. Waiters do not poll: each one sleeps on the
// current "changed" channel, which the next change closes.
type recordBook struct {
	mu      sync.Mutex
	records []*Record
	changed chan struct{} // nil until someone waits; closed and cleared on change
}

// notifyLocked wakes every waiter; the caller holds b.mu.
func (b *recordBook) notifyLocked() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// add appends a record and returns the pointer the request updates through
// the book's methods.
func (b *recordBook) add(r Record) *Record {
	p := &r
	b.mu.Lock()
	b.records = append(b.records, p)
	b.notifyLocked()
	b.mu.Unlock()
	return p
}

// update applies fn to r under the book's lock, unless r has already ended.
func (b *recordBook) update(r *Record, fn func(r *Record)) {
	b.mu.Lock()
	if r.Outcome == "" {
		fn(r)
		b.notifyLocked()
	}
	b.mu.Unlock()
}

// setComputed and setSent are the per-token updates; they avoid a closure
// on the hot path. Like update, they leave an ended record as it was.
func (b *recordBook) setComputed(r *Record, n int) {
	b.mu.Lock()
	if r.Outcome == "" {
		r.TokensComputed = n
		b.notifyLocked()
	}
	b.mu.Unlock()
}

func (b *recordBook) setSent(r *Record, n int) {
	b.mu.Lock()
	if r.Outcome == "" {
		r.TokensSent = n
		b.notifyLocked()
	}
	b.mu.Unlock()
}

// end sets r's outcome if it has none yet and reports whether it did: the
// first ending wins (a crash marks records before their handlers notice).
func (b *recordBook) end(r *Record, outcome string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.Outcome != "" {
		return false
	}
	r.Outcome = outcome
	r.Ended = time.Now()
	b.notifyLocked()
	return true
}

// endAll ends every running record with outcome.
func (b *recordBook) endAll(outcome string) {
	now := time.Now()
	b.mu.Lock()
	for _, r := range b.records {
		if r.Outcome == "" {
			r.Outcome = outcome
			r.Ended = now
		}
	}
	b.notifyLocked()
	b.mu.Unlock()
}

// snapshot copies all records in arrival order.
func (b *recordBook) snapshot() []Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Record, len(b.records))
	for i, r := range b.records {
		out[i] = *r
	}
	return out
}

// wait blocks until some record satisfies match, re-evaluating on every
// change, and returns a copy of the first (oldest) such record. match runs
// on copies, outside the book's lock, so it may call back into the server.
func (b *recordBook) wait(ctx context.Context, match func(Record) bool) (Record, error) {
	for {
		b.mu.Lock()
		records := make([]Record, len(b.records))
		for i, r := range b.records {
			records[i] = *r
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed // taken with the copies, so no change is missed
		b.mu.Unlock()
		for _, r := range records {
			if match(r) {
				return r, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Record{}, fmt.Errorf("sim: waiting for a record: %w", ctx.Err())
		}
	}
}
