package agent

import (
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/sim"
)

// A fenced stream whose lease the test keeps renewing arrives complete and
// identical in content to the same request sent to the engine directly. The
// fake clock advances 100 ms per renewal, well past the 300 ms TTL in total,
// so the stream only completes if renewals work.
func TestStreamThroughAgentMatchesDirect(t *testing.T) {
	s := startSim(t, sim.Config{DecodePerToken: 2 * time.Millisecond})
	clock := newFakeClock()
	a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now})
	hc := newHTTPClient(t)
	ctl := controlClient(t, a, "")
	ctx := testContext(t)
	const ttl = 300 * time.Millisecond

	resp, err := post(t, ctx, hc, s.URL(), "/v1/chat/completions", chatBody(t, 40, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	direct := readStream(resp.Body, nil)
	resp.Body.Close()

	l := &leased{attempt: "req_match.a1", epoch: 11, ttl: ttl}
	resp, err = post(t, ctx, hc, a.URL(), "/v1/chat/completions", chatBody(t, 40, true), l)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !isEventStream(resp.Header) {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	renewals := 0
	fenced := readStream(resp.Body, func(n int) {
		if n%5 != 0 {
			return
		}
		clock.Advance(100 * time.Millisecond)
		reply := renew(t, ctl, ttl, lease.Lease{Attempt: l.attempt, Epoch: l.epoch})
		if st := reply.Statuses()[l.attempt]; st != lease.Renewed && st != lease.Ended {
			t.Errorf("renewal %d: status %v", renewals, st)
		}
		renewals++
	})
	resp.Body.Close()

	if direct.err != nil || !direct.done {
		t.Fatalf("direct stream: err %v, done %v", direct.err, direct.done)
	}
	if fenced.err != nil || !fenced.done {
		t.Fatalf("fenced stream: err %v, done %v after %d events", fenced.err, fenced.done, len(fenced.events))
	}
	dText, dFinish := direct.contents()
	fText, fFinish := fenced.contents()
	if fText != dText || len(fenced.events) != len(direct.events) || len(fFinish) != 1 || fFinish[0] != dFinish[0] {
		t.Fatalf("fenced answer differs from direct:\nfenced %d events %q %v\ndirect %d events %q %v",
			len(fenced.events), fText, fFinish, len(direct.events), dText, dFinish)
	}
	if time.Duration(renewals)*100*time.Millisecond <= ttl {
		t.Fatalf("only %d renewals: the test did not outlive the TTL", renewals)
	}
	info := waitEnded(t, a, l.attempt)
	if info.EndReason != EndFinished || info.EventsForwarded != int64(len(fenced.events)) || info.Epoch != l.epoch {
		t.Fatalf("attempt info %+v, client saw %d events", info, len(fenced.events))
	}
	rec := waitSimRecord(t, s, l.attempt, simEnded)
	if rec.Outcome != sim.OutcomeFinished || rec.TokensSent != 40 {
		t.Fatalf("sim record %+v", rec)
	}
}

// When nobody renews, the agent aborts the engine request within the TTL:
// the engine sees its client leave long before max_tokens, and the gateway
// sees a broken stream, never [DONE].
func TestUnrenewedLeaseAbortsEngineRequest(t *testing.T) {
	s := startSim(t, sim.Config{DecodePerToken: 10 * time.Millisecond})
	a := startAgent(t, Config{Engine: s.URL()})
	hc := newHTTPClient(t)
	const ttl = 300 * time.Millisecond
	const maxTokens = 2000 // 20 s of decoding

	l := &leased{attempt: "req_expire.a1", epoch: 3, ttl: ttl}
	resp, err := post(t, testContext(t), hc, a.URL(), "/v1/chat/completions", chatBody(t, maxTokens, true), l)
	if err != nil {
		t.Fatal(err)
	}
	read := readStream(resp.Body, nil)
	resp.Body.Close()
	if read.done || read.err == nil {
		t.Fatalf("stream ended cleanly (done=%v, err=%v) after the lease expired", read.done, read.err)
	}
	info := waitEnded(t, a, l.attempt)
	if info.EndReason != EndLeaseExpired {
		t.Fatalf("end reason %q, want %q", info.EndReason, EndLeaseExpired)
	}
	if took := info.EndedAt.Sub(info.Started); took > 10*ttl {
		t.Fatalf("engine request aborted %v after the lease started (TTL %v)", took, ttl)
	}
	if int64(len(read.events)) != info.EventsForwarded {
		t.Fatalf("client got %d events, agent forwarded %d", len(read.events), info.EventsForwarded)
	}
	rec := waitSimRecord(t, s, l.attempt, simEnded)
	if rec.Outcome != sim.OutcomeCancelled || rec.TokensComputed >= maxTokens/4 {
		t.Fatalf("sim record: outcome %q after %d of %d tokens", rec.Outcome, rec.TokensComputed, maxTokens)
	}
}

// An engine that has gone silent sends no event to check the lease against;
// the expiry timer aborts it anyway.
func TestSilentEngineAbortedAtExpiry(t *testing.T) {
	s := startSim(t, sim.Config{})
	if err := s.ArmFault("hang@sent:2", 1); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, Config{Engine: s.URL()})
	hc := newHTTPClient(t)
	l := &leased{attempt: "req_silent.a1", epoch: 4, ttl: 300 * time.Millisecond}
	resp, err := post(t, testContext(t), hc, a.URL(), "/v1/chat/completions", chatBody(t, 100, true), l)
	if err != nil {
		t.Fatal(err)
	}
	read := readStream(resp.Body, nil)
	resp.Body.Close()
	if read.done || read.err == nil {
		t.Fatalf("stream ended cleanly (done=%v, err=%v)", read.done, read.err)
	}
	info := waitEnded(t, a, l.attempt)
	if info.EndReason != EndLeaseExpired {
		t.Fatalf("end reason %q, want %q", info.EndReason, EndLeaseExpired)
	}
	rec := waitSimRecord(t, s, l.attempt, simEnded)
	if rec.Outcome != sim.OutcomeHung || rec.TokensSent != 3 {
		t.Fatalf("sim record: outcome %q, %d tokens sent; want hung after 3", rec.Outcome, rec.TokensSent)
	}
	if len(read.events) != rec.TokensSent+1 { // the role chunk, then one per token
		t.Fatalf("client got %d events, want the %d sent before the hang", len(read.events), rec.TokensSent+1)
	}
}

// A newer epoch of the same logical request arriving at the agent fences the
// older attempt at once: it is aborted even though its engine is silent and
// its lease has not run out.
func TestNewerEpochSupersedesRunningAttempt(t *testing.T) {
	s := startSim(t, sim.Config{})
	if err := s.ArmFault("hang@sent:1", 1); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock() // frozen: the old lease never expires
	a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now})
	hc := newHTTPClient(t)
	old := &leased{attempt: "req_sup.a1", epoch: 5, ttl: 300 * time.Millisecond}
	resp, err := post(t, testContext(t), hc, a.URL(), "/v1/chat/completions", chatBody(t, 50, true), old)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitSimRecord(t, s, old.attempt, func(r sim.Record) bool { return r.TokensSent == 2 })

	rerun := &leased{attempt: "req_sup.a2", epoch: 6, ttl: 300 * time.Millisecond}
	resp2, err := post(t, testContext(t), hc, a.URL(), "/v1/chat/completions", chatBody(t, 5, true), rerun)
	if err != nil {
		t.Fatal(err)
	}
	read := readStream(resp2.Body, nil)
	resp2.Body.Close()
	if read.err != nil || !read.done {
		t.Fatalf("rerun stream: err %v done %v", read.err, read.done)
	}
	if info := waitEnded(t, a, old.attempt); info.EndReason != EndSuperseded || !info.Revoked {
		t.Fatalf("old attempt %+v", info)
	}
	if rec := waitSimRecord(t, s, old.attempt, simEnded); rec.Outcome != sim.OutcomeHung {
		t.Fatalf("old attempt's engine record %+v", rec)
	}
}
