package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// attemptWriteFails is a store whose first write of an attempt record fails, as a journal
// that is briefly unreachable would.
type attemptWriteFails struct {
	store.Store
	failed atomic.Bool
}

func (s *attemptWriteFails) Apply(ctx context.Context, muts []store.Mutation) error {
	for _, m := range muts {
		if _, ok := m.(store.UpsertAttempt); ok && s.failed.CompareAndSwap(false, true) {
			return errors.New("journal unreachable")
		}
	}
	return s.Store.Apply(ctx, muts)
}

// A keyed request's attempt is journaled before it is sent; when that write fails, the
// attempt is not sent, the client is told, and nothing records an attempt that never ran
// as completed.
func TestAttemptNotSentWhenItCannotBeJournaled(t *testing.T) {
	st := &attemptWriteFails{Store: store.NewMemory()}
	e := newEnv(t, envOptions{store: st})
	var resp *http.Response
	_, err := e.client.Chat.Completions.New(testCtx(t), chatParams("journal me", 4),
		option.WithHeader("Idempotency-Key", "journal-down-1"), option.WithResponseInto(&resp))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Code != "journal_unavailable" {
		t.Fatalf("client got %v", err)
	}
	if n := e.totalSimRequests(); n != 0 {
		t.Fatalf("%d requests reached a replica", n)
	}
	rec := e.record(resp.Header.Get("X-Request-Id"))
	for _, a := range rec.Attempts {
		if a.EndReason == "completed" {
			t.Fatalf("an attempt that was never sent is journaled as completed: %+v", rec)
		}
	}
	if rec.Outcome != "failed" {
		t.Fatalf("journal %+v", rec)
	}
}
