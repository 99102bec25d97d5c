package gateway_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// The owner of a stream waits on the engine's socket between tokens (docs/design.md §6):
// what else must reach it wakes that wait. A replica declared dead while its stream is
// silent after its two tokens ends the request at once with an honest interruption, long
// before the idle timeout, which is set so that only the wake can end it in the test's
// time.
func TestDeclaredDeadWakesSilentStream(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Policy.IdleTimeout = config.Duration(time.Hour)
	}})
	e.armAll("hang@sent:1") // two tokens, then silence
	s := e.client.Chat.Completions.NewStreaming(testCtx(t), chatParams("speak, then fall silent", 12))
	defer s.Close()
	content, declared := 0, false
	for s.Next() {
		if len(s.Current().Choices) == 0 || s.Current().Choices[0].Delta.Content == "" {
			continue
		}
		if content++; content == 2 && !declared {
			declared = true
			declareAllDead(t, e)
		}
	}
	if !declared {
		t.Fatalf("the stream ended after %d content chunks, before the replica was declared dead: %v", content, s.Err())
	}
	ev := interruption(t, s.Err())
	if ev["code"] != "upstream_decode_interrupted" || ev["delivered_output_tokens"] != float64(2) {
		t.Fatalf("interruption event %v", ev)
	}
	var id string
	for _, sm := range e.sims {
		for _, r := range sm.Records() {
			id = r.RequestID
		}
	}
	rec := e.record(id)
	if rec.Outcome != "interrupted" || len(rec.Attempts) != 1 || !strings.Contains(rec.Attempts[0].EndReason, "declared_dead") {
		t.Fatalf("journal %+v", rec)
	}
}

// declareAllDead declares both replicas dead through the admin API, as an operator whose
// node was lost.
func declareAllDead(t *testing.T, e *env) {
	t.Helper()
	for _, replica := range []string{"sim-1", "sim-2"} {
		resp := post(t, e.admin.URL+"/admin/replicas/sim-model/"+replica, `{"state":"dead","reason":"node lost"}`)
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("admin: %d %s", resp.StatusCode, b)
		}
	}
}

// The owner of a stream sends its request itself and waits for the engine's head on the
// engine's socket, as it waits for tokens (docs/design.md §6); an engine that took the
// request and sends nothing, not even its headers, is hang@accept. The first-token deadline
// ending that wait is TestHangBeforeBoundaryIsNotRerunInDirectMode.
//
// What reaches the owner while it waits for the head wakes that wait: the replicas
// declared dead end the request at once, long before the first-token deadline, which is
// set so that only the wake can end it in the test's time.
func TestDeclaredDeadWakesHeadWait(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Policy.FirstTokenTimeout = config.Duration(time.Hour)
	}})
	e.armAll("hang@accept")
	done := make(chan streamResult, 1)
	go func() { done <- e.stream(testCtx(t), chatParams("wait for a head that never comes", 12)) }()

	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	// The engines' books say when the request arrives, on whichever replica it went to.
	arrived := make(chan string, len(e.sims))
	for _, s := range e.sims {
		go func() {
			if r, err := s.WaitRecord(ctx, func(sim.Record) bool { return true }); err == nil {
				arrived <- r.RequestID
			}
		}()
	}
	var id string
	select {
	case id = <-arrived:
	case <-ctx.Done():
		t.Fatal("the request never reached an engine")
	}
	// The owner waits for the head itself: no reader goroutine stands between it and the
	// engine (the request's body fits one write).
	// (The engine has the request, so the write is over; the owner may still be on its way
	// from it to the wait.)
	stacks := allStacks()
	for !strings.Contains(stacks, "request.(*Run).readHeadInline") && ctx.Err() == nil {
		runtime.Gosched()
		stacks = allStacks()
	}
	if !strings.Contains(stacks, "request.(*Run).readHeadInline") || strings.Contains(stacks, "request.reader.read") {
		t.Fatalf("while the engine sends no head, the owner should wait for it in readHeadInline, with no reader goroutine; goroutines:\n%s", stacks)
	}
	declareAllDead(t, e)
	r := <-done
	if r.err == nil {
		t.Fatalf("the request completed (%q) though its engine never answered", r.content)
	}
	// The first declaration proves the first attempt stopped, so it is rerun on the other
	// replica, if that one is not declared dead yet; the second declaration ends that
	// attempt's head wait in turn.
	rec := e.record(id)
	if rec.Outcome != "failed" || len(rec.Attempts) == 0 || len(rec.Attempts) > 2 {
		t.Fatalf("journal %+v", rec)
	}
	for _, a := range rec.Attempts {
		if !strings.Contains(a.EndReason, "declared_dead") {
			t.Fatalf("attempt %d ended with %q; want the declaration: journal %+v", a.N, a.EndReason, rec)
		}
	}
}

// allStacks is every goroutine's stack, as a panic would print them.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}
