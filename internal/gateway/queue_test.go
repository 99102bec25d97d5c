package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
)

// The keys of the queue tests, and their secrets.
const (
	floodKey  = "sk-queue-flood-key"
	trickle   = "sk-queue-trickle-key"
	heavyKey  = "sk-queue-heavy-key"
	lightKey  = "sk-queue-light-key"
	urgentKey = "sk-queue-urgent-key"
)

// queueEnv is a gateway in front of one replica that takes capacity requests at once,
// with the queue on, keepalives every 10 ms (a queued stream's headers prove it waits)
// and the keys given.
func queueEnv(t *testing.T, capacity int, pool func(*config.Model), keys ...config.APIKey) *env {
	return queueEnvWith(t, nil, capacity, pool, keys...)
}

// queueEnvWith is queueEnv with its replica configured by simCfg (nil: the defaults).
func queueEnvWith(t *testing.T, simCfg func(int, *sim.Config), capacity int, pool func(*config.Model), keys ...config.APIKey) *env {
	return newEnv(t, envOptions{replicas: 1, sim: simCfg, config: func(c *config.Config) {
		c.Models[0].MaxOutstanding = capacity
		c.Policy.Keepalive = config.Duration(10 * time.Millisecond)
		if pool != nil {
			pool(&c.Models[0])
		}
		c.Auth = config.Auth{Keys: keys}
	}})
}

// queuedStream is a stream the test sent, read in the background.
type queuedStream struct {
	id      string
	headers chan struct{} // closed when the response headers arrived
	done    chan struct{} // closed when the body ended; body is then set
	body    string
	cancel  context.CancelFunc
}

// sendStream sends a stream with key and extra headers; its answer is read in the
// background.
func sendStream(t *testing.T, e *env, key, body string, headers ...string) *queuedStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	qs := &queuedStream{headers: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(qs.done)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			close(qs.headers)
			qs.body = "error: " + err.Error()
			return
		}
		qs.id = resp.Header.Get("X-Request-Id")
		close(qs.headers)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		qs.body = fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	return qs
}

func (qs *queuedStream) waitHeaders(t *testing.T) {
	t.Helper()
	select {
	case <-qs.headers:
	case <-time.After(10 * time.Second):
		t.Fatal("no response headers")
	}
}

func (qs *queuedStream) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-qs.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream never ended")
	}
	return qs.body
}

// hung holds the replica's one slot: a stream the engine never answers, until cancelled.
func hung(t *testing.T, e *env, key string) *queuedStream {
	t.Helper()
	n := len(e.sims[0].Records())
	qs := sendStream(t, e, key, streamBody("hold the slot", 5), "X-Sim-Fault", "hang@sent:0")
	waitRecords(t, e.sims[0], n+1)
	return qs
}

// A request that finds every replica at its capacity waits, its stream kept alive with
// headers and keepalive comments, and runs when the slot frees; the access log's
// queued_ms and ttft_ms include the wait.
func TestQueueWaitsForAFreedSlot(t *testing.T) {
	e := queueEnv(t, 1, nil, config.APIKey{ID: "a", Key: floodKey})
	hold := hung(t, e, floodKey)
	queued := sendStream(t, e, floodKey, streamBody("wait for it", 3))
	queued.waitHeaders(t) // its first keepalive: it waits in the queue
	if n := len(e.sims[0].Records()); n != 1 {
		t.Fatalf("the queued request reached the replica (%d records)", n)
	}
	hold.cancel()
	body := queued.wait(t)
	if !strings.HasPrefix(body, "200 ") || !strings.Contains(body, ": keepalive") || !strings.Contains(body, "[DONE]") {
		t.Fatalf("queued stream: %s", body)
	}
	// The journal keeps the wait: at least the 10 ms before its first keepalive.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/requests/"+queued.id+"?wait=20s", nil)
	req.Header.Set("Authorization", "Bearer "+floodKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Outcome  string `json:"outcome"`
		QueuedMs int64  `json:"queued_ms"`
	}
	err = json.NewDecoder(resp.Body).Decode(&view)
	resp.Body.Close()
	if err != nil || view.Outcome != "completed" || view.QueuedMs < 10 {
		t.Fatalf("GET /v1/requests/%s: %+v, %v; want completed, queued_ms >= 10", queued.id, view, err)
	}
	m := e.metrics()
	for _, want := range []string{`fencegate_queue_ended_total{end="dequeued",model="sim-model",priority="0"} 1`,
		`fencegate_queue_length{model="sim-model",priority="0"} 0`, `fencegate_queue_wait_seconds_count{model="sim-model",priority="0"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Key A floods a replica that decodes two sequences at once with 12 concurrent streams;
// key B sends one request at a time. Every one of B's completes, and none of A's is
// refused: they wait their turn.
func TestFairQueueFloodDoesNotStarveATrickle(t *testing.T) {
	e := queueEnv(t, 2, nil, config.APIKey{ID: "a", Key: floodKey}, config.APIKey{ID: "b", Key: trickle})
	ctx := testCtx(t)
	var stop atomic.Bool
	var aDone, aFailed atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; !stop.Load(); j++ {
				a := send(t, http.MethodPost, e.srv.URL+"/v1/chat/completions", floodKey, streamBody(fmt.Sprintf("flood %d.%d", i, j), 4))
				if a.status != http.StatusOK || !strings.Contains(a.body, "[DONE]") {
					aFailed.Add(1)
					t.Errorf("a flood request: %d %s", a.status, a.body)
					return
				}
				aDone.Add(1)
			}
		}()
	}
	// B starts once A's backlog is in the queue.
	if _, err := e.sims[0].WaitRecord(ctx, func(sim.Record) bool { return len(e.sims[0].Records()) >= 12 }); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		b := send(t, http.MethodPost, e.srv.URL+"/v1/chat/completions", trickle, streamBody(fmt.Sprintf("trickle %d", i), 4))
		if b.status != http.StatusOK || !strings.Contains(b.body, "[DONE]") {
			t.Fatalf("b's request %d: %d %s", i, b.status, b.body)
		}
	}
	stop.Store(true)
	wg.Wait()
	if aFailed.Load() != 0 || aDone.Load() < 12 {
		t.Fatalf("a: %d completed, %d failed", aDone.Load(), aFailed.Load())
	}
}

// Two keys flood one slot, weighted 3:1: they complete 3:1 within 10 %. The engine takes
// 2 ms an answer, far longer than a client takes to send its next request, so that both
// keys always have requests waiting when the slot frees: a key whose clients were all
// between two requests would have nothing queued, and an idle key banks no credit.
func TestFairQueueWeights(t *testing.T) {
	paced := func(_ int, c *sim.Config) { c.DecodePerToken = 2 * time.Millisecond }
	e := queueEnvWith(t, paced, 1, nil, config.APIKey{ID: "heavy", Key: heavyKey, Weight: 3}, config.APIKey{ID: "light", Key: lightKey, Weight: 1})
	const total = 200
	var completed atomic.Int32
	var per sync.Map
	var wg sync.WaitGroup
	for _, key := range []string{heavyKey, lightKey} {
		n := new(atomic.Int32)
		per.Store(key, n)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; completed.Load() < total; j++ {
					a := send(t, http.MethodPost, e.srv.URL+"/v1/chat/completions", key, streamBody(fmt.Sprintf("%d.%d", i, j), 1))
					if a.status != http.StatusOK {
						t.Errorf("%d %s", a.status, a.body)
						return
					}
					if completed.Add(1) <= total {
						n.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	h, _ := per.Load(heavyKey)
	l, _ := per.Load(lightKey)
	heavy, light := h.(*atomic.Int32).Load(), l.(*atomic.Int32).Load()
	if r := float64(heavy) / float64(light); r < 2.7 || r > 3.3 {
		t.Fatalf("completed heavy %d, light %d: ratio %.2f, want 3 ± 10 %%", heavy, light, r)
	}
}

// A request of a higher class takes the next freed slot, ahead of every request of a lower
// one that waited before it.
func TestPriorityTakesTheNextSlot(t *testing.T) {
	e := queueEnv(t, 1, nil, config.APIKey{ID: "a", Key: floodKey},
		config.APIKey{ID: "urgent", Key: urgentKey, Priority: 10},
		config.APIKey{ID: "b", Key: trickle, PriorityHeader: true})
	hold := hung(t, e, floodKey)
	var low []*queuedStream
	for i := range 4 {
		qs := sendStream(t, e, floodKey, streamBody(fmt.Sprintf("low %d", i), 2))
		qs.waitHeaders(t)
		low = append(low, qs)
	}
	// b may set its class with the header; a's own header would be ignored.
	mid := sendStream(t, e, trickle, streamBody("mid", 2), "X-Fencegate-Priority", "5")
	mid.waitHeaders(t)
	ignored := sendStream(t, e, floodKey, streamBody("not allowed", 2), "X-Fencegate-Priority", "50")
	ignored.waitHeaders(t)
	urgent := sendStream(t, e, urgentKey, streamBody("urgent", 2))
	urgent.waitHeaders(t)
	hold.cancel()
	for _, qs := range append(low, mid, ignored, urgent) {
		if body := qs.wait(t); !strings.Contains(body, "[DONE]") {
			t.Fatalf("stream %s: %s", qs.id, body)
		}
	}
	var order []string
	for _, r := range e.sims[0].Records()[1:] {
		order = append(order, r.RequestID)
	}
	want := []string{urgent.id, mid.id, low[0].id, low[1].id, low[2].id, low[3].id, ignored.id}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("served %v, want urgent, mid, then the low ones in order: %v", order, want)
	}
}

// A request that waits queue.max_wait gets 503 queue_timeout with Retry-After; nothing ran.
func TestQueueTimeout(t *testing.T) {
	e := queueEnv(t, 1, func(m *config.Model) { m.Queue.MaxWait = config.Duration(100 * time.Millisecond) },
		config.APIKey{ID: "a", Key: floodKey})
	hung(t, e, floodKey)
	a := send(t, http.MethodPost, e.srv.URL+"/v1/chat/completions", floodKey, chatFor("sim-model", 2))
	if a.status != http.StatusServiceUnavailable || errorCode(a.body) != "queue_timeout" || a.header.Get("Retry-After") == "" {
		t.Fatalf("answer %d %v %s", a.status, a.header, a.body)
	}
	if n := len(e.sims[0].Records()); n != 1 {
		t.Fatalf("%d requests reached the replica, want the held one only", n)
	}
	if m := e.metrics(); !strings.Contains(m, `fencegate_queue_ended_total{end="expired",model="sim-model",priority="0"} 1`) {
		t.Error("/metrics does not count the expiry")
	}
}

// A full queue sheds the lowest class first: a request of a higher class displaces a
// waiting one of a lower class (its stream ends with queue_full), and one of the lowest
// class is refused at once with 429 queue_full and Retry-After.
func TestQueueShedsTheLowestFirst(t *testing.T) {
	e := queueEnv(t, 1, func(m *config.Model) { m.Queue.MaxLen = 2 },
		config.APIKey{ID: "a", Key: floodKey, Priority: -1}, config.APIKey{ID: "urgent", Key: urgentKey, Priority: 10})
	hold := hung(t, e, floodKey)
	first := sendStream(t, e, floodKey, streamBody("low 1", 2))
	first.waitHeaders(t)
	second := sendStream(t, e, floodKey, streamBody("low 2", 2))
	second.waitHeaders(t)
	urgent := sendStream(t, e, urgentKey, streamBody("urgent", 2))
	// The newest low request is shed for it: its stream ends with the error event.
	if body := second.wait(t); !strings.Contains(body, `"code":"queue_full"`) {
		t.Fatalf("shed stream: %s", body)
	}
	refused := send(t, http.MethodPost, e.srv.URL+"/v1/chat/completions", floodKey, chatFor("sim-model", 2))
	if refused.status != http.StatusTooManyRequests || errorCode(refused.body) != "queue_full" || refused.header.Get("Retry-After") == "" {
		t.Fatalf("refused: %d %v %s", refused.status, refused.header, refused.body)
	}
	hold.cancel()
	for _, qs := range []*queuedStream{urgent, first} {
		if body := qs.wait(t); !strings.Contains(body, "[DONE]") {
			t.Fatalf("stream %s: %s", qs.id, body)
		}
	}
	if m := e.metrics(); !strings.Contains(m, `fencegate_queue_ended_total{end="shed",model="sim-model",priority="-1"} 2`) {
		t.Errorf("/metrics does not count the two shed:\n%s", grepLines(m, "fencegate_queue"))
	}
}

// A key kept in the store (fencegate keys create --priority) has its class in the queue as
// a configured key has: its waiting request takes the next slot ahead of earlier ones.
func TestStoredKeyClassInTheQueue(t *testing.T) {
	st := store.NewMemory()
	t.Cleanup(func() { st.Close() })
	const storedUrgent = "sk-queue-stored-urgent-key"
	createStoreKey(t, st, store.APIKey{ID: "stored-urgent", Priority: 20}, storedUrgent)
	e := newEnv(t, envOptions{replicas: 1, store: st, config: func(c *config.Config) {
		c.Models[0].MaxOutstanding = 1
		c.Policy.Keepalive = config.Duration(10 * time.Millisecond)
		c.Auth = config.Auth{Keys: []config.APIKey{{ID: "a", Key: floodKey}}}
	}})
	if err := e.gw.RefreshKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	hold := hung(t, e, floodKey)
	low := sendStream(t, e, floodKey, streamBody("low", 2))
	low.waitHeaders(t)
	urgent := sendStream(t, e, storedUrgent, streamBody("urgent", 2))
	urgent.waitHeaders(t)
	hold.cancel()
	for _, qs := range []*queuedStream{low, urgent} {
		if body := qs.wait(t); !strings.Contains(body, "[DONE]") {
			t.Fatalf("stream %s: %s", qs.id, body)
		}
	}
	var order []string
	for _, r := range e.sims[0].Records()[1:] {
		order = append(order, r.RequestID)
	}
	if want := []string{urgent.id, low.id}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("served %v, want the stored key's class-20 request first: %v", order, want)
	}
}
