package sim

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// metricValue returns the value of the sample of name whose labels include
// every label in want, from a Prometheus text exposition.
func metricValue(t *testing.T, exposition []byte, name string, want ...string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(exposition)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		labels, value, _ := strings.Cut(line[len(name):], " ")
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(labels, w)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	t.Fatalf("no sample of %s with labels %v in:\n%s", name, want, exposition)
	return 0
}

func scrape(t *testing.T, s *Server) []byte {
	t.Helper()
	status, b := getBody(t, newClient(t), s.URL()+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	return b
}

func TestQueueWaitsThenRejects(t *testing.T) {
	s := startSim(t, Config{MaxRunning: 1, MaxWaiting: 1})
	c := newClient(t)
	url := s.URL() + "/v1/chat/completions"
	stream := func(ctx context.Context, fault string, progress chan int) <-chan observation {
		body := jsonBody(t, chatRequest("queue", map[string]any{"stream": true, "max_tokens": 3}))
		req := newPost(t, ctx, url, body, map[string]string{"X-Sim-Fault": fault})
		done := make(chan observation, 1)
		go func() { done <- observe(ctx, c, req, progress) }()
		return done
	}

	// A holds the only running slot: it hangs after its first token.
	ctxA, cancelA := context.WithCancel(testContext(t))
	progressA := make(chan int, 100)
	doneA := stream(ctxA, "hang@sent:0", progressA)
	waitProgress(t, progressA, 2)

	// B is taken in (its headers arrive, as vLLM sends them before
	// scheduling) but must wait.
	progressB := make(chan int, 100)
	doneB := stream(testContext(t), "", progressB)
	waitProgress(t, progressB, 0)
	m := scrape(t, s)
	if got := metricValue(t, m, "vllm:num_requests_waiting", `model_name="sim-model"`); got != 1 {
		t.Errorf("num_requests_waiting = %v, want 1", got)
	}
	if got := metricValue(t, m, "vllm:num_requests_running"); got != 1 {
		t.Errorf("num_requests_running = %v, want 1", got)
	}
	if rec := s.Records()[1]; rec.TokensComputed != 0 || rec.Outcome != "" {
		t.Errorf("B ran while A held the slot: %+v", rec)
	}

	// C finds the queue full and is turned away at once.
	status, b := postJSON(t, c, url, jsonBody(t, chatRequest("queue", nil)), nil)
	if status != http.StatusTooManyRequests {
		t.Fatalf("C: status %d, want 429", status)
	}
	if e := decodeError(t, b); e.Error.Code != 429 || e.Error.Type != "TooManyRequestsError" {
		t.Errorf("C: error %+v", *e.Error)
	}
	if rec := s.Records()[2]; rec.Outcome != OutcomeRejected {
		t.Errorf("C's record = %+v", rec)
	}

	// A's client leaves; B gets the slot and finishes.
	cancelA()
	<-doneA
	if o := <-doneB; o.err != nil || len(o.events) != 6 {
		t.Errorf("B: %d events, err %v", len(o.events), o.err)
	}
	idB := s.Records()[1].ID
	recB := waitRecord(t, s, func(r Record) bool { return r.ID == idB && r.Outcome != "" })
	if recB.Outcome != OutcomeFinished {
		t.Errorf("B's record = %+v", recB)
	}
	m = scrape(t, s)
	if got := metricValue(t, m, "vllm:num_requests_waiting"); got != 0 {
		t.Errorf("num_requests_waiting after = %v, want 0", got)
	}
	if got := metricValue(t, m, "vllm:num_requests_running"); got != 0 {
		t.Errorf("num_requests_running after = %v, want 0", got)
	}
	if got := metricValue(t, m, "vllm:kv_cache_usage_perc"); got != 0 {
		t.Errorf("kv_cache_usage_perc after = %v, want 0", got)
	}
}

func TestQueuedRequestCancelled(t *testing.T) {
	s := startSim(t, Config{MaxRunning: 1})
	c := newClient(t)
	url := s.URL() + "/v1/chat/completions"
	body := jsonBody(t, chatRequest("queue", map[string]any{"stream": true}))

	holder, cancelHolder := context.WithCancel(testContext(t))
	progress := make(chan int, 100)
	holderDone := make(chan observation, 1)
	holderReq := newPost(t, holder, url, body, map[string]string{"X-Sim-Fault": "hang@prefill"})
	go func() { holderDone <- observe(holder, c, holderReq, progress) }()
	defer func() { cancelHolder(); <-holderDone }()
	waitProgress(t, progress, 0)

	ctx, cancel := context.WithCancel(testContext(t))
	progressQ := make(chan int, 100)
	done := make(chan observation, 1)
	go func() { done <- observe(ctx, c, newPost(t, ctx, url, body, nil), progressQ) }()
	waitProgress(t, progressQ, 0)
	cancel()
	if o := <-done; !errors.Is(o.err, context.Canceled) {
		t.Errorf("client error = %v", o.err)
	}
	rec := waitRecord(t, s, func(r Record) bool { return r.Fault == "" && r.Outcome != "" })
	if rec.Outcome != OutcomeCancelled || rec.TokensComputed != 0 {
		t.Errorf("queued record = %+v", rec)
	}
	if _, waiting, _ := s.sched.load(); waiting != 0 {
		t.Errorf("the cancelled request is still queued (%d waiting)", waiting)
	}
}

func TestSchedulerFIFO(t *testing.T) {
	sched := newScheduler(1, 0)
	first, err := sched.enqueue()
	if err != nil || !first.granted {
		t.Fatalf("first ticket: %+v, %v", first, err)
	}
	var queued []*ticket
	for range 3 {
		tk, err := sched.enqueue()
		if err != nil || tk.granted {
			t.Fatalf("queued ticket: %+v, %v", tk, err)
		}
		queued = append(queued, tk)
	}
	for i, tk := range queued {
		sched.release()
		if err := sched.wait(context.Background(), tk); err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
		for _, later := range queued[i+1:] {
			if later.granted {
				t.Fatalf("a later ticket was granted before ticket %d", i)
			}
		}
	}
	sched.release()
	if running, waiting, _ := sched.load(); running != 0 || waiting != 0 {
		t.Errorf("after all releases: running %d, waiting %d", running, waiting)
	}
}
