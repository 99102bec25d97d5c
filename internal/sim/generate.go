package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// generation is one chat or text completion request in flight: it walks the
// request through accept, queue, prefill and decode, firing the request's
// faults at each point and keeping its record current.
type generation struct {
	s       *Server
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context // ends when the client leaves or the replica dies
	rec     *Record
	id      string
	created int64
	spec    generationSpec
	plan    faultPlan

	enc         *streamEncoder // set once stream headers are sent
	headersSent bool
	slow        float64     // decode time multiplier from slow faults
	timer       *time.Timer // reused by every pause
	kvBlocks    int         // KV blocks this sequence holds in the scheduler's count
	words       []int       // vocabulary indices generated so far
}

// serveGeneration handles POST /v1/chat/completions and /v1/completions.
func (s *Server) serveGeneration(endpoint string) http.HandlerFunc {
	idPrefix := "cmpl-"
	if endpoint == endpointChat {
		idPrefix = "chatcmpl-"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		g := &generation{
			s:       s,
			w:       w,
			rc:      http.NewResponseController(w),
			ctx:     r.Context(),
			id:      fmt.Sprintf("%s%016x%016x", idPrefix, rand.Uint64(), rand.Uint64()),
			created: time.Now().Unix(),
			slow:    1,
		}
		g.run(endpoint, r)
	}
}

// run is the whole life of the request.
func (g *generation) run(endpoint string, r *http.Request) {
	s := g.s
	g.rec = s.book.add(Record{
		ID:        g.id,
		AttemptID: r.Header.Get("X-Fencegate-Attempt"),
		RequestID: r.Header.Get("X-Request-Id"),
		Endpoint:  endpoint,
		Started:   time.Now(),
	})
	if rid := r.Header.Get("X-Request-Id"); rid != "" {
		g.w.Header().Set("X-Request-Id", rid) // as vLLM with --enable-request-id-headers
	}
	// Reading the body to its end also lets net/http watch the connection,
	// so a client that leaves cancels g.ctx.
	body, err := io.ReadAll(http.MaxBytesReader(g.w, r.Body, maxBodyBytes))
	if err != nil {
		if g.ctx.Err() != nil {
			g.endByContext()
			return
		}
		g.fail(apiError{status: http.StatusBadRequest, message: "reading the request body: " + err.Error()})
		return
	}
	plan, err := s.takeFaults(r.Header.Get(faultHeader))
	if err != nil {
		g.fail(apiError{status: http.StatusBadRequest, message: err.Error(), param: faultHeader})
		return
	}
	g.plan = plan
	spec, invalid := s.parseGeneration(endpoint, body)
	g.spec = spec
	s.book.update(g.rec, func(r *Record) {
		r.Fault = plan.String()
		r.Stream = spec.stream
		r.PromptTokens = len(spec.promptIDs)
	})
	if g.fire(pointAccept, 0) {
		return
	}
	if invalid != nil {
		g.fail(*invalid)
		return
	}
	g.generate()
}

// generate queues, prefills and decodes a valid request.
func (g *generation) generate() {
	s := g.s
	t, err := s.sched.enqueue()
	if err != nil {
		s.book.end(g.rec, OutcomeRejected)
		s.writeError(g.w, apiError{
			status:  http.StatusTooManyRequests,
			message: fmt.Sprintf("The waiting queue is full (%d requests waiting); try again later.", s.cfg.MaxWaiting),
		})
		return
	}
	// Like vLLM, a stream's headers go out as soon as the request is taken
	// in, before it is scheduled: a client sees 200 while the request waits.
	if g.spec.stream {
		g.sendHeaders()
	}
	if err := s.sched.wait(g.ctx, t); err != nil {
		g.endByContext()
		return
	}
	defer s.sched.release()
	defer func() { s.sched.addBlocks(-g.kvBlocks) }()

	if g.fire(pointPrefill, 0) || !g.prefill() {
		return
	}
	g.decode()
}

func (g *generation) sendHeaders() {
	h := g.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	g.w.WriteHeader(http.StatusOK)
	_ = g.rc.Flush() // a client already gone is noticed by the next wait or write
	g.headersSent = true
	g.enc = newStreamEncoder(g.spec.endpoint, g.id, g.created, g.s.cfg.Model)
}

// prefill looks the prompt up in the prefix cache and spends prefill time
// on the uncached part only. It reports false when the request ended.
func (g *generation) prefill() bool {
	s := g.s
	ids := g.spec.promptIDs
	cached := s.cache.lookup(ids)
	s.metrics.prefixQueries.Add(float64(len(ids)))
	s.metrics.prefixHits.Add(float64(cached))
	s.metrics.promptTokens.Add(float64(len(ids)))
	s.book.update(g.rec, func(r *Record) { r.CachedTokens = cached })
	g.holdBlocks(len(ids))
	if !g.pause(time.Duration(len(ids)-cached) * s.cfg.PrefillPerToken) {
		return false
	}
	s.cache.insert(ids)
	return true
}

// decode produces the output tokens, writing each as its own chunk when
// streaming, then completes the reply.
func (g *generation) decode() {
	s := g.s
	gen := newGenerator(s.cfg.Name, g.spec.seed, g.spec.prompt)
	n, reason := g.spec.maxTokens, "length"
	if natural := gen.naturalLength(); !g.spec.ignoreEOS && natural < n {
		n, reason = natural, "stop"
	}
	g.words = make([]int, 0, n)
	for i := range n {
		if !g.pause(s.cfg.DecodePerToken) {
			return
		}
		w := gen.word(i)
		g.words = append(g.words, w)
		s.book.setComputed(g.rec, i+1)
		g.holdBlocks(len(g.spec.promptIDs) + i + 1)
		if g.fire(pointComputed, i) {
			return
		}
		if !g.spec.stream {
			continue
		}
		g.enc.reset()
		if i == 0 {
			g.enc.role() // vLLM sends the role once the first token exists
		}
		g.enc.token(w)
		if !g.write() {
			return
		}
		s.book.setSent(g.rec, i+1)
		if g.fire(pointSent, i) {
			return
		}
	}
	g.complete(reason)
}

// complete sends the end of the reply and ends the record as finished.
func (g *generation) complete(reason string) {
	s := g.s
	n := len(g.words)
	if g.spec.stream {
		g.enc.reset()
		g.enc.finish(reason)
		if g.spec.includeUsage {
			g.enc.usage(len(g.spec.promptIDs), n)
		}
		g.enc.done()
		if !g.write() {
			return
		}
	} else {
		var text strings.Builder
		for _, w := range g.words {
			text.WriteString(vocabulary[w])
		}
		body, err := json.Marshal(completionBody(&g.spec, g.id, g.created, s.cfg.Model, text.String(), reason, n))
		if err != nil {
			g.fail(apiError{status: http.StatusInternalServerError, message: "encoding the reply: " + err.Error()})
			return
		}
		g.w.Header().Set("Content-Type", "application/json")
		if _, err := g.w.Write(body); err != nil {
			g.endByContext()
			return
		}
		s.book.setSent(g.rec, n)
	}
	s.metrics.generationTokens.Add(float64(n))
	s.metrics.requestSuccess.WithLabelValues(reason).Inc()
	// The answer's blocks are cached too, so the next turn of a chat, whose
	// prompt repeats this one and the answer, hits them.
	all := make([]uint32, 0, len(g.spec.promptIDs)+n)
	all = append(all, g.spec.promptIDs...)
	for _, w := range g.words {
		all = append(all, vocabularyIDs[w])
	}
	s.cache.insert(all)
	s.book.end(g.rec, OutcomeFinished)
}

// write sends the encoder's pending events and flushes them.
func (g *generation) write() bool {
	if _, err := g.w.Write(g.enc.bytes()); err != nil {
		g.endByContext()
		return false
	}
	if err := g.rc.Flush(); err != nil {
		g.endByContext()
		return false
	}
	return true
}

// pause waits d (scaled by slow faults) unless the request ends first. A
// timer, not a sleep, so a client that leaves is noticed at once.
func (g *generation) pause(d time.Duration) bool {
	if d > 0 && g.slow != 1 {
		d = time.Duration(float64(d) * g.slow)
	}
	if d <= 0 {
		select {
		case <-g.ctx.Done():
			g.endByContext()
			return false
		default:
			return true
		}
	}
	if g.timer == nil {
		g.timer = time.NewTimer(d)
	} else {
		g.timer.Reset(d)
	}
	select {
	case <-g.timer.C:
		return true
	case <-g.ctx.Done():
		g.timer.Stop()
		g.endByContext()
		return false
	}
}

// holdBlocks sets the KV blocks this sequence holds to cover tokens.
func (g *generation) holdBlocks(tokens int) {
	bs := g.s.cache.blockSize
	want := (tokens + bs - 1) / bs
	if want != g.kvBlocks {
		g.s.sched.addBlocks(want - g.kvBlocks)
		g.kvBlocks = want
	}
}

// endByContext ends the record after the request's context ended or a
// write failed: "crashed" when the replica died, else "cancelled" (the
// client went away).
func (g *generation) endByContext() {
	outcome := OutcomeCancelled
	if replicaDown(g.ctx) {
		outcome = OutcomeCrashed
	}
	if g.s.book.end(g.rec, outcome) && outcome == OutcomeCancelled {
		g.s.metrics.requestSuccess.WithLabelValues("abort").Inc()
	}
}

// fail answers with an error reply and ends the record as "error".
func (g *generation) fail(e apiError) {
	g.s.book.end(g.rec, OutcomeError)
	g.s.writeError(g.w, e)
}
