package request

import (
	"net/http/httptest"
	"testing"
	"time"
)

// Drain reaches a request only through its inbox, and only while the request's handler
// runs: a shutdown posted while the owner runs queues its event and caps the client's write
// deadline; once the owner has closed the inbox (its handler is returning), a shutdown is
// dropped and the response writer is not touched.
func TestInboxShutdownOnlyWhileOpen(t *testing.T) {
	cw := newClientWriter(httptest.NewRecorder(), 30*time.Second)
	ib := newInbox(cw)
	cut := time.Unix(1_700_000_000, 0)
	if !ib.post(control{kind: ctlShutdown, cut: cut}) {
		t.Fatal("a shutdown posted to an open inbox was refused")
	}
	if got := cw.shutdownBy.Load(); got != cut.UnixNano() {
		t.Fatalf("write deadline capped at %d, want %d", got, cut.UnixNano())
	}
	select {
	case <-ib.ready:
	default:
		t.Fatal("the owner was not signalled")
	}
	if got := ib.take(nil); len(got) != 1 || got[0].kind != ctlShutdown {
		t.Fatalf("took %+v", got)
	}

	ib.close()
	if ib.post(control{kind: ctlShutdown, cut: cut.Add(time.Second)}) {
		t.Fatal("a shutdown posted after the owner finished was accepted")
	}
	if got := cw.shutdownBy.Load(); got != cut.UnixNano() {
		t.Fatalf("a closed inbox still capped the write deadline (%d)", got)
	}
	if got := ib.take(nil); len(got) != 0 {
		t.Fatalf("a closed inbox holds %+v", got)
	}
}

// Posting never waits for the owner: many posts before the owner looks leave one signal
// and every event, in order.
func TestInboxPostNeverBlocks(t *testing.T) {
	cw := newClientWriter(httptest.NewRecorder(), 30*time.Second)
	ib := newInbox(cw)
	for i := range 100 {
		ib.post(control{kind: ctlPromptTokens, tokens: i})
	}
	<-ib.ready
	if cw.shutdownBy.Load() != 0 {
		t.Fatal("only a shutdown caps the write deadline")
	}
	got := ib.take(nil)
	if len(got) != 100 {
		t.Fatalf("took %d events, want 100", len(got))
	}
	for i, c := range got {
		if c.tokens != i {
			t.Fatalf("event %d is %+v", i, c)
		}
	}
}
