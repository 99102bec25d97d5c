package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
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

	format      replyFormat // the endpoint's wire format
	out         streamWire  // set once stream headers are sent
	headersSent bool
	rolesSent   bool        // a chat stream's role chunks are out
	slow        float64     // decode time multiplier from slow faults
	timer       *time.Timer // reused by every pause
	kvBlocks    int         // KV blocks this request holds in the scheduler's count
	seqs        []*sequence // in choice order
	salt        string      // what decided the sequences' text (Server.weights)
	computed    int         // output tokens computed, all sequences together
	cached      int         // prompt tokens found in the prefix cache
	sent        int         // output tokens written and flushed, all sequences together
	textBuf     []byte      // scratch for one chunk's text

	// An engine-run tool's call (enginecall.go): the call, the request's session with
	// its tool server, and the tokens the model spent writing it.
	call       *engineCall
	session    *toolSession
	callTokens int
}

// serveGeneration handles POST /v1/chat/completions, /v1/completions,
// /v1/messages, /v1/responses and /v1/embeddings.
func (s *Server) serveGeneration(endpoint string) http.HandlerFunc {
	// vLLM's request ids: the Messages endpoint is chat underneath and
	// answers with the chat completion's id; a response's id is
	// ResponsesRequest.request_id, "resp_" and a uuid4 in hex.
	idPrefix := "cmpl-"
	switch endpoint {
	case endpointChat, endpointMessages:
		idPrefix = "chatcmpl-"
	case endpointResponses:
		idPrefix = "resp_"
	case endpointEmbeddings:
		idPrefix = "embd-"
	}
	format := formatFor(endpoint)
	return func(w http.ResponseWriter, r *http.Request) {
		g := &generation{
			s:       s,
			w:       w,
			rc:      http.NewResponseController(w),
			ctx:     r.Context(),
			id:      idPrefix + randomHex(),
			created: time.Now().Unix(),
			slow:    1,
			format:  format,
			spec:    generationSpec{endpoint: endpoint, n: 1},
		}
		g.run(endpoint, r)
	}
}

// randomHex is 32 random hex digits, the length of the uuid4 hex vLLM puts
// in its ids.
func randomHex() string { return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) }

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
	spec, invalid := s.parseRequest(endpoint, body)
	g.spec = spec
	s.book.update(g.rec, func(r *Record) {
		r.Fault = plan.String()
		r.Stream = spec.stream
		r.PromptTokens = spec.promptTokens()
		r.Choices = spec.sequences()
	})
	if g.fire(pointAccept, 0) {
		return
	}
	if invalid != nil {
		g.fail(*invalid)
		return
	}
	if endpoint == endpointEmbeddings {
		g.embed()
		return
	}
	g.generate()
}

// enqueue asks the scheduler for the request's slots, and answers 429 as vLLM does when
// its waiting queue is full (ok false).
func (g *generation) enqueue() (t *ticket, ok bool) {
	t, err := g.s.sched.enqueueSlots(g.spec.sequences())
	if err != nil {
		g.s.book.end(g.rec, OutcomeRejected)
		g.writeError(apiError{
			status:  http.StatusTooManyRequests,
			message: fmt.Sprintf("The waiting queue is full (%d requests waiting); try again later.", g.s.cfg.MaxWaiting),
		})
		return nil, false
	}
	return t, true
}

// generate queues, prefills and decodes a valid request.
func (g *generation) generate() {
	s := g.s
	t, ok := g.enqueue()
	if !ok {
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
	defer s.sched.releaseSlots(t.slots)
	defer func() { s.sched.addBlocks(-g.kvBlocks) }()

	g.salt = s.weights()
	g.seqs = newSequences(g.salt, s.cfg.ToolCallIDStyle, &g.spec)
	if g.fire(pointPrefill, 0) || !g.prefill() {
		return
	}
	if g.spec.engine != nil {
		defer g.closeToolSession()
		if !g.engineTurn() {
			return
		}
	}
	g.decode()
}

func (g *generation) sendHeaders() {
	h := g.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	g.w.WriteHeader(http.StatusOK)
	g.headersSent = true
	g.out = g.format.stream(g)
	// Whatever the endpoint sends before the engine's first output goes
	// out with the headers (the Responses API's created and in_progress
	// events).
	g.out.preamble()
	_, _ = g.w.Write(g.out.bytes())
	g.out.reset()
	_ = g.rc.Flush() // a client already gone is noticed by the next wait or write
}

// prefill looks each sequence's prompt up in the prefix cache and spends
// prefill time on the uncached part only. Like vLLM's child requests, the
// sequences of one prompt are prefilled one after another, so all but the
// first find the prompt's full blocks cached. It reports false when the
// request ended.
func (g *generation) prefill() bool {
	s := g.s
	g.holdAllBlocks()
	cachedTotal := 0
	for _, q := range g.seqs {
		ids := q.prompt.ids
		cached := s.cache.lookup(ids)
		s.metrics.prefixQueries.Add(float64(len(ids)))
		s.metrics.prefixHits.Add(float64(cached))
		s.metrics.promptTokens.Add(float64(len(ids)))
		cachedTotal += cached
		g.cached = cachedTotal
		s.book.update(g.rec, func(r *Record) { r.CachedTokens = cachedTotal })
		if !g.pause(time.Duration(len(ids)-cached) * s.cfg.PrefillPerToken) {
			return false
		}
		s.cache.insert(ids, cached/s.cache.blockSize)
		if s.cacheFaultHits(len(ids), cached) {
			g.corrupt(q)
		}
	}
	return true
}

// decode produces the output tokens step by step, as an engine decodes a
// batch: each step takes one decode time and yields the next token of every
// sequence still running, in choice order. A stream writes each chunk as
// soon as it is due (every token, or every Config.StreamInterval tokens),
// so choices interleave as they do in vLLM's stream.
func (g *generation) decode() {
	for i := 0; ; i++ {
		running := false
		for _, q := range g.seqs {
			running = running || i < q.length
		}
		if !running {
			break
		}
		if !g.pause(g.s.cfg.DecodePerToken) {
			return
		}
		for _, q := range g.seqs {
			if i < q.length && !g.step(q, i) {
				return
			}
		}
	}
	g.complete()
}

// step computes sequence q's token i and streams it. It reports false when
// the request ended.
func (g *generation) step(q *sequence, i int) bool {
	s := g.s
	k := g.computed // the request-wide index that computed:K and sent:K name
	q.tokens = append(q.tokens, q.token(i))
	g.computed++
	s.book.setComputed(g.rec, g.computed)
	g.holdBlocks(q)
	if g.fire(pointComputed, k) {
		return false
	}
	if !g.spec.stream {
		return true
	}
	q.pending = append(q.pending, k)
	// vLLM's output processor with --stream-interval N sends a sequence's
	// first token at once, then whenever N tokens wait, and the rest when
	// the sequence finishes.
	last := i == q.length-1
	if (q.written == 0 || len(q.pending) >= s.cfg.StreamInterval || last) && !g.flush(q) {
		return false
	}
	if last {
		g.out.finish(q)
		return g.write()
	}
	return true
}

// flush writes q's computed tokens as one chunk (preceded, the first time,
// by the role chunks of every choice) and fires the sent faults of the
// tokens it carried. It reports false when the request ended.
func (g *generation) flush(q *sequence) bool {
	s := g.s
	if !g.rolesSent {
		// vLLM sends the roles once the first token exists.
		g.out.open(g.seqs)
		g.rolesSent = true
	}
	g.textBuf = q.unwrittenText(g.textBuf[:0])
	switch {
	case q.call == nil:
		g.out.text(q, g.textBuf)
	case q.written == 0:
		g.out.toolStart(q, g.textBuf)
	default:
		g.out.toolArgs(q, g.textBuf)
	}
	if !g.write() {
		return false
	}
	q.written = len(q.tokens)
	g.sent += len(q.pending)
	s.book.setSent(g.rec, g.sent)
	carried := q.pending
	q.pending = q.pending[:0] // nothing appends to it while carried is read
	for _, k := range carried {
		if g.fire(pointSent, k) {
			return false
		}
	}
	return true
}

// complete sends the end of the reply and ends the record as finished (or
// as an error, when the endpoint's server fails a reply the engine
// finished).
func (g *generation) complete() {
	s := g.s
	outcome := OutcomeFinished
	if g.spec.stream {
		g.out.close(g.computed)
		if !g.write() {
			return
		}
	} else {
		status, body := g.format.whole(g)
		if status != http.StatusOK {
			outcome = OutcomeError
			s.book.end(g.rec, OutcomeError) // before the client can see the reply
		}
		g.w.Header().Set("Content-Type", "application/json")
		g.w.WriteHeader(status)
		if _, err := g.w.Write(body); err != nil {
			g.endByContext()
			return
		}
		if status == http.StatusOK {
			g.sent = g.computed
			s.book.setSent(g.rec, g.sent)
		}
	}
	s.metrics.generationTokens.Add(float64(g.computed))
	for _, q := range g.seqs {
		s.metrics.requestSuccess.WithLabelValues(q.reason).Inc() // vLLM counts each child request
		// The answer's blocks are cached too, so the next turn of a chat,
		// whose prompt repeats this one and the answer, hits them.
		s.cache.insert(q.cacheIDs(), len(q.prompt.ids)/s.cache.blockSize)
	}
	s.book.end(g.rec, outcome)
}

// write sends the encoder's pending events, flushes them and empties the
// encoder's buffer.
func (g *generation) write() bool {
	if _, err := g.w.Write(g.out.bytes()); err != nil {
		g.endByContext()
		return false
	}
	if err := g.rc.Flush(); err != nil {
		g.endByContext()
		return false
	}
	g.out.reset()
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

// holdAllBlocks sets the KV blocks the request holds before decoding: the
// full blocks of each prompt once, shared by its sequences as vLLM's prefix
// caching shares them, plus each sequence's partial last prompt block.
func (g *generation) holdAllBlocks() {
	bs := g.s.cache.blockSize
	shared := 0
	for _, p := range g.spec.prompts {
		shared += len(p.ids) / bs
	}
	g.addBlocks(shared)
	for _, q := range g.seqs {
		g.holdBlocks(q)
	}
}

// holdBlocks sets the blocks sequence q holds beyond its prompt's shared
// full blocks to cover its prompt and the tokens it has generated.
func (g *generation) holdBlocks(q *sequence) {
	bs := g.s.cache.blockSize
	promptLen := len(q.prompt.ids)
	want := (promptLen+len(q.tokens)+bs-1)/bs - promptLen/bs
	if want != q.blocks {
		g.addBlocks(want - q.blocks)
		q.blocks = want
	}
}

func (g *generation) addBlocks(delta int) {
	g.s.sched.addBlocks(delta)
	g.kvBlocks += delta
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
		// vLLM counts each aborted child request.
		g.s.metrics.requestSuccess.WithLabelValues("abort").Add(float64(max(1, len(g.seqs))))
	}
}

// fail answers with an error reply and ends the record as "error".
func (g *generation) fail(e apiError) {
	g.s.book.end(g.rec, OutcomeError)
	g.writeError(e)
}

// writeError sends e as a complete HTTP error reply in the endpoint's shape.
func (g *generation) writeError(e apiError) {
	g.w.Header().Set("Content-Type", "application/json")
	g.w.WriteHeader(e.status)
	_, _ = g.w.Write(g.format.errorBody(g.s, e)) // a client that left cannot be told anything
}
