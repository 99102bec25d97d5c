package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// The owner of a stream sends its request itself and waits for the engine's head on the
// engine's socket, as it waits for tokens (docs/design.md §6). An engine that took the
// request and sends nothing, not even its headers (hang@accept), meets the first-token
// deadline there: the client gets the 504 an unresponsive engine earns before any output,
// the request is not rerun (direct mode cannot prove the engine stopped), and the engine
// sees its request closed.
func TestHeadWaitEndsAtTheFirstTokenDeadline(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Policy.FirstTokenTimeout = config.Duration(300 * time.Millisecond)
	}})
	e.armAll("hang@accept")
	r := e.stream(testCtx(t), chatParams("no headers at all", 12))
	var apiErr *openai.Error
	if !errors.As(r.err, &apiErr) || apiErr.StatusCode != http.StatusGatewayTimeout || apiErr.Code != "upstream_unresponsive" {
		t.Fatalf("error %v", r.err)
	}
	if e.totalSimRequests() != 1 {
		t.Fatalf("%d upstream requests, want 1", e.totalSimRequests())
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	for _, s := range e.sims {
		if len(s.Records()) == 0 {
			continue
		}
		if _, err := s.WaitRecord(ctx, func(r sim.Record) bool { return r.Outcome != "" }); err != nil {
			t.Fatalf("%s: the request waiting for its head was never closed: %v", s.Name(), err)
		}
	}
}

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
	for _, replica := range []string{"sim-1", "sim-2"} {
		resp := post(t, e.admin.URL+"/admin/replicas/sim-model/"+replica, `{"state":"dead","reason":"node lost"}`)
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("admin: %d %s", resp.StatusCode, b)
		}
	}
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
