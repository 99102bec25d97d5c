package agent

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sim"
)

// A cancel revokes the lease and is acked only once the engine request has
// ended; after the ack nothing more of the attempt reaches the gateway, even
// though the engine had far more to say.
func TestCancelAcksAfterEngineRequestEnded(t *testing.T) {
	s := startSim(t, sim.Config{DecodePerToken: 5 * time.Millisecond})
	clock := newFakeClock() // frozen: the lease cannot expire, only the cancel can end it
	a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now})
	hc := newHTTPClient(t)
	ctl := controlClient(t, a, "")
	const maxTokens = 2000

	l := &leased{attempt: "req_cancel.a1", epoch: 21, ttl: 300 * time.Millisecond}
	resp, err := post(t, testContext(t), hc, a.URL(), "/v1/chat/completions", chatBody(t, maxTokens, true), l)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	fiveEvents := make(chan struct{})
	result := make(chan streamRead, 1)
	go func() {
		result <- readStream(resp.Body, func(n int) {
			if n == 5 {
				close(fiveEvents)
			}
		})
	}()
	select {
	case <-fiveEvents:
	case <-testContext(t).Done():
		t.Fatal("the stream did not start")
	}

	ack, err := ctl.Cancel(testContext(t), l.attempt, l.epoch)
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if !ack.Acked || ack.Unknown || ack.AlreadyEnded || ack.EndedAtMs == 0 || ack.Attempt != l.attempt {
		t.Fatalf("cancel reply %+v", ack)
	}
	// The ack means the attempt has ended: WaitEnded returns at once, with
	// the count of events forwarded, which can no longer change.
	info := waitEnded(t, a, l.attempt)
	if info.EndReason != EndRevoked || !info.Revoked {
		t.Fatalf("attempt info %+v", info)
	}
	read := <-result
	if read.done || read.err == nil {
		t.Fatalf("stream ended cleanly (done=%v, err=%v) after a cancel", read.done, read.err)
	}
	if got := int64(len(read.events)); got != info.EventsForwarded {
		t.Fatalf("client received %d events, agent had forwarded %d at the ack: %d arrived after it",
			got, info.EventsForwarded, got-info.EventsForwarded)
	}
	rec := waitSimRecord(t, s, l.attempt, simEnded)
	if rec.Outcome != sim.OutcomeCancelled || rec.TokensComputed >= maxTokens/2 {
		t.Fatalf("sim record: outcome %q after %d of %d tokens", rec.Outcome, rec.TokensComputed, maxTokens)
	}

	again, err := ctl.Cancel(testContext(t), l.attempt, l.epoch)
	if err != nil || !again.AlreadyEnded || again.EndedAtMs != ack.EndedAtMs {
		t.Fatalf("second cancel: %+v, %v", again, err)
	}
	reply := renew(t, ctl, 300*time.Millisecond, lease.Lease{Attempt: l.attempt, Epoch: l.epoch})
	if st := reply.Statuses()[l.attempt]; st != lease.Ended {
		t.Fatalf("renewal after the cancel: %v, want ended", st)
	}
}

// A cancel that arrives before its data request is acked as unknown, and the
// data request, when it arrives, is refused without calling the engine.
func TestCancelBeforeDataRequestRefusesIt(t *testing.T) {
	s := startSim(t, sim.Config{})
	a := startAgent(t, Config{Engine: s.URL()})
	ctl := controlClient(t, a, "")
	ack, err := ctl.Cancel(testContext(t), "req_early.a1", 9)
	if err != nil || !ack.Acked || !ack.Unknown {
		t.Fatalf("cancel of an unseen attempt: %+v, %v", ack, err)
	}
	resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions", chatBody(t, 4, false),
		&leased{attempt: "req_early.a1", epoch: 9, ttl: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("late data request: status %d, want 409", resp.StatusCode)
	}
	if n := len(s.Records()); n != 0 {
		t.Fatalf("the engine was called %d times", n)
	}
}

// A cancel must name an attempt and an epoch.
func TestCancelValidation(t *testing.T) {
	s := startSim(t, sim.Config{})
	a := startAgent(t, Config{Engine: s.URL()})
	ctl := controlClient(t, a, "")
	_, err := ctl.Cancel(testContext(t), "", 1)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.Status != http.StatusBadRequest {
		t.Fatalf("cancel without attempt: %v", err)
	}
	_, err = ctl.Cancel(testContext(t), "req_x.a1", 0)
	if !errors.As(err, &oe) || oe.Status != http.StatusBadRequest {
		t.Fatalf("cancel without epoch: %v", err)
	}
}
