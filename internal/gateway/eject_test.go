package gateway_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/openai/openai-go/v3/option"
)

// testClock is a clock that moves only when the test moves it.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// replicaOf is a replica's entry in /readyz.
func (e *env) replicaOf(name string) map[string]any {
	e.t.Helper()
	for _, p := range e.readyz()["models"].([]any) {
		for _, r := range p.(map[string]any)["replicas"].([]any) {
			if m := r.(map[string]any); m["name"] == name {
				return m
			}
		}
	}
	e.t.Fatalf("no replica %s in /readyz", name)
	return nil
}

// ejectPrompt is long enough for prefix affinity (512 bytes), so every request that
// carries it prefers one replica first.
var ejectPrompt = strings.Repeat("A long system prompt that every request of this test shares. ", 12) + "Say hello."

// A replica that resets every request at prefill while its /health passes: the first
// eject_after (5) requests that prefer it fail there and are rerun on the other replica;
// then it is ejected, and the following requests go straight to the healthy replica (one
// attempt each) instead of spending the retry budget, which never runs dry. A passing probe
// does not end the ejection; dead_cooldown later it is back, fails five times more and is
// ejected for twice as long.
func TestReplicaEjectedAfterConsecutiveFailures(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, envOptions{now: clock.now})
	p := chatParams(ejectPrompt, 4)
	ctx := testCtx(t)

	// Which replica does the prompt prefer?
	first := e.stream(ctx, p)
	if first.err != nil {
		t.Fatal(first.err)
	}
	rec := e.record(first.requestID)
	bad := rec.Attempts[0].Replica
	good, badSim := "sim-2", e.sims[0]
	if bad == "sim-2" {
		good, badSim = "sim-1", e.sims[1]
	}
	fault := option.WithHeader("X-Sim-Fault", "reset@prefill;on="+bad)

	// run sends n requests one after another and checks each replica it ran on.
	run := func(n int, wantAttempts func(i int) int) {
		t.Helper()
		for i := range n {
			r := e.stream(ctx, p, fault)
			if r.err != nil || r.content == "" {
				t.Fatalf("request %d: %v (content %q)", i+1, r.err, r.content)
			}
			rec := e.record(r.requestID)
			want := wantAttempts(i)
			if rec.Outcome != "completed" || len(rec.Attempts) != want || rec.Attempts[want-1].Replica != good {
				t.Fatalf("request %d: journal %+v, want %d attempts, the last on %s", i+1, rec, want, good)
			}
			if want == 2 && (rec.Attempts[0].Replica != bad || rec.Attempts[0].EndReason != "connection_reset" || rec.Attempts[0].Failure != "dead") {
				t.Fatalf("request %d: first attempt %+v", i+1, rec.Attempts[0])
			}
		}
	}
	before := len(badSim.Records())
	run(20, func(i int) int {
		if i < config.DefaultEjectAfter {
			return 2 // rerun after a reset on the preferred replica
		}
		return 1 // the preferred replica is ejected: straight to the healthy one
	})
	if got := len(badSim.Records()) - before; got != config.DefaultEjectAfter {
		t.Fatalf("%s got %d requests, want %d", bad, got, config.DefaultEjectAfter)
	}
	wantUntil := clock.now().Add(config.DefaultDeadCooldown)
	checkEjected := func(until time.Time) {
		t.Helper()
		r := e.replicaOf(bad)
		if r["state"] != "dead" || r["reason"] != "ejected after 5 consecutive failed attempts (connection_reset)" ||
			r["ejected_until"] != until.Format(time.RFC3339Nano) {
			t.Fatalf("/readyz shows %s as %v", bad, r)
		}
	}
	checkEjected(wantUntil)
	if g := e.replicaOf(good); g["state"] != "healthy" {
		t.Fatalf("/readyz shows %s as %v", good, g)
	}
	m := e.metrics()
	for _, want := range []string{
		`fencegate_replica_ejections_total{model="sim-model",replica="` + bad + `"} 1`,
		`fencegate_requests_total{api="chat",model="sim-model",outcome="completed"} 21`,
		`fencegate_replica_state{model="sim-model",replica="` + bad + `",state="dead"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %s:\n%s", want, m)
		}
	}
	if strings.Contains(m, `outcome="failed"`) {
		t.Fatal("a request failed")
	}

	// Its /health passes, and a probe now does not end the ejection.
	resp, err := http.Post(e.admin.URL+"/admin/refresh", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	checkEjected(wantUntil)
	run(3, func(int) int { return 1 })

	// dead_cooldown later it is back and preferred again: five more failures eject it for
	// twice as long.
	clock.advance(config.DefaultDeadCooldown)
	if r := e.replicaOf(bad); r["state"] != "healthy" {
		t.Fatalf("after the cooldown /readyz shows %s as %v", bad, r)
	}
	run(8, func(i int) int {
		if i < config.DefaultEjectAfter {
			return 2
		}
		return 1
	})
	checkEjected(clock.now().Add(2 * config.DefaultDeadCooldown))
	if m := e.metrics(); !strings.Contains(m, `fencegate_replica_ejections_total{model="sim-model",replica="`+bad+`"} 2`) ||
		strings.Contains(m, `outcome="failed"`) {
		t.Fatalf("metrics after the second ejection:\n%s", m)
	}
}

// The failures may be the network's or the requests' rather than the replicas': the only
// replica of a pool is never ejected. Its requests fail (there is nowhere to rerun them),
// it stays in rotation, and the held ejections are counted.
func TestLastHealthyReplicaIsNotEjected(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, envOptions{replicas: 1, now: clock.now})
	ctx := testCtx(t)
	for i := range 7 {
		r := e.stream(ctx, chatParams(ejectPrompt, 4), option.WithHeader("X-Sim-Fault", "status:500@accept"))
		if r.err == nil {
			t.Fatalf("request %d succeeded", i+1)
		}
	}
	r := e.replicaOf("sim-1")
	if r["state"] != "healthy" || r["consecutive_failures"] != float64(7) || r["ejected_until"] != nil {
		t.Fatalf("/readyz shows sim-1 as %v", r)
	}
	m := e.metrics()
	if !strings.Contains(m, `fencegate_replica_ejections_held_total{model="sim-model",replica="sim-1"} 3`) ||
		strings.Contains(m, `fencegate_replica_ejections_total{`) {
		t.Fatalf("metrics:\n%s", m)
	}
	// A completed attempt ends the run of failures.
	if r := e.stream(ctx, chatParams(ejectPrompt, 4)); r.err != nil {
		t.Fatal(r.err)
	}
	if r := e.replicaOf("sim-1"); r["consecutive_failures"] != nil {
		t.Fatalf("/readyz shows sim-1 as %v after a completed request", r)
	}
}
