package request

import (
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/protocol"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/trace"
)

// clientWriter is the only path from a request's owner to its client. Every write carries
// a deadline, so a client that stops reading (its receive window full, its connection
// open) cannot hold the owner: after client_write_timeout without progress the write
// fails and the client is treated as gone (stalled).
//
// Setting a connection deadline on every token would cost a timer update per token, so
// the deadline is moved lazily: it is set to now + timeout + timeout/4 and moved again only
// when less than timeout is left. A stalled client is therefore detected between timeout
// and 1.25 × timeout after its last accepted byte, never earlier.
type clientWriter struct {
	w http.ResponseWriter
	// flushW flushes w and setWriteDeadline sets its connection's write deadline: found
	// once, where http.ResponseController walks w's Unwrap chain on every call (flusherOf,
	// deadlinerOf).
	flushW           func() error
	setWriteDeadline func(time.Time) error
	timeout          time.Duration
	// deadline is the write deadline set on the connection (zero: none yet).
	deadline time.Time
	// shutdownBy (unix nanoseconds, 0: none) caps the deadline while the gateway shuts
	// down; Drain sets it from another goroutine (expire).
	shutdownBy atomic.Int64

	status  int // HTTP status sent (0: none yet)
	dirty   bool
	err     error
	stalled bool
	replay  *replayBuffer // non-nil for a keyed request

	// held is what a keyed request wrote since the last flush, not yet passed to the
	// response writer (see keep).
	held []byte
	// rec, when the request keeps a trace, records every byte written for the client
	// (nil otherwise, so that a request without a trace pays nothing per write).
	rec *trace.Recorder
}

func newClientWriter(w http.ResponseWriter, timeout time.Duration) *clientWriter {
	return &clientWriter{w: w, flushW: flusherOf(w), setWriteDeadline: deadlinerOf(w), timeout: timeout}
}

// keep makes cw the writer of a keyed request: it keeps what the client received, up to
// maxReplay bytes, for replay, and it holds every write back until the next flush. The
// outcome of a keyed request must be durable before its client sees the end of the
// answer (docs/design.md §6), and the step that writes that end also journals the outcome
// (Run.finish); the owner flushes only after the step. Passed to the response writer
// directly, a write larger than its buffer (a whole answer over 4 KiB, a long final event)
// would reach the connection at once, before the journal, and a retry sent as soon as the
// client has read it could find the key still in use. Unkeyed requests are not held: their
// writes cost no copy.
func (cw *clientWriter) keep(maxReplay int) {
	cw.replay = newReplayBuffer(maxReplay)
}

// arm makes sure the connection's write deadline is far enough ahead for the next write.
func (cw *clientWriter) arm() {
	now := time.Now()
	if !cw.deadline.IsZero() && cw.deadline.Sub(now) >= cw.timeout {
		return
	}
	d := now.Add(cw.timeout + cw.timeout/4)
	if sb := cw.shutdownBy.Load(); sb != 0 && d.After(time.Unix(0, sb)) {
		d = time.Unix(0, sb)
	}
	cw.setDeadline(d)
	// Drain may have capped the deadline between the load above and the call; read it
	// again so that the earlier deadline wins whatever the order.
	if sb := cw.shutdownBy.Load(); sb != 0 && d.After(time.Unix(0, sb)) {
		cw.setDeadline(time.Unix(0, sb))
	}
}

func (cw *clientWriter) setDeadline(d time.Time) {
	if err := cw.setWriteDeadline(d); err == nil {
		cw.deadline = d
	} else if errors.Is(err, http.ErrNotSupported) {
		cw.deadline = d // a writer without a connection (tests): nothing to bound
	}
}

// expire caps the write deadline at t. It is the one method that may be called from
// another goroutine: the inbox calls it for Drain (Run.Shutdown), only while the request's
// handler runs, and a write blocked on a stalled client then fails at t.
func (cw *clientWriter) expire(t time.Time) {
	cw.shutdownBy.Store(t.UnixNano())
	cw.setWriteDeadline(t)
}

// streamHeaders writes the headers of an SSE response.
func (cw *clientWriter) streamHeaders() {
	// Keys in canonical form, set without Header.Set's canonicalization of each: this is
	// on every stream's path to its first byte.
	h := cw.w.Header()
	h["Content-Type"] = eventStreamType
	h["Cache-Control"] = noCache
	h["X-Accel-Buffering"] = accelBufferingNo
	cw.w.WriteHeader(http.StatusOK)
	cw.status = http.StatusOK
	cw.dirty = true
}

// bodyHeaders writes the headers of a complete JSON response of n bytes.
func (cw *clientWriter) bodyHeaders(n int) {
	h := cw.w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(n)}
	cw.w.WriteHeader(http.StatusOK)
	cw.status = http.StatusOK
}

func (cw *clientWriter) write(b []byte) {
	if cw.err != nil || len(b) == 0 {
		return
	}
	if cw.deadline.IsZero() {
		cw.arm()
	}
	// Otherwise the deadline set at the last flush (at least the timeout ahead then) covers
	// this write: writes between two flushes take microseconds, and reading the clock for
	// each would cost more than the write into the buffer.
	cw.dirty = true
	if cw.replay != nil {
		// A keyed request: held until the flush (see keep).
		cw.held = append(cw.held, b...)
		cw.replay.add(b)
		if cw.rec != nil {
			cw.rec.Write(b)
		}
		return
	}
	n, err := cw.w.Write(b)
	if cw.rec != nil {
		cw.rec.Write(b[:n]) // what the connection took; a failed write's rest never left
	}
	cw.fail(err)
}

// flush sends what was written since the last flush; the owner calls it once per batch of
// events, not per event, and after the step that wrote them.
func (cw *clientWriter) flush() { cw.send(true) }

// finish ends what the owner writes. With last, what is written is handed to the response
// writer but not flushed: the handler is about to return, and the server (the gateway's
// own, or net/http's) then writes it with the response's end (for a stream, the chunked
// body's last chunk) in one write.
// Otherwise it flushes, as after any batch.
func (cw *clientWriter) finish(last bool) { cw.send(!last) }

// send passes what was written since the last send to the response writer (a keyed
// request's held bytes) and, with flush, flushes it to the connection.
func (cw *clientWriter) send(flush bool) {
	if !cw.dirty || cw.err != nil {
		return
	}
	cw.dirty = false
	cw.arm() // a flush's deadline, or that of the write at the handler's return
	if len(cw.held) > 0 {
		_, err := cw.w.Write(cw.held)
		cw.held = cw.held[:0]
		if err != nil {
			cw.fail(err)
			return
		}
	}
	if flush {
		cw.fail(cw.flushW())
	}
}

// flusherOf returns what flushes w, found as http.ResponseController.Flush finds it: the
// first writer in w's Unwrap chain with FlushError or Flush.
func flusherOf(w http.ResponseWriter) func() error {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }:
			return t.FlushError
		case http.Flusher:
			return func() error { t.Flush(); return nil }
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return func() error { return http.ErrNotSupported }
		}
	}
}

// deadlinerOf returns what sets w's write deadline, found as
// http.ResponseController.SetWriteDeadline finds it: the first writer in w's Unwrap chain
// with SetWriteDeadline.
func deadlinerOf(w http.ResponseWriter) func(time.Time) error {
	for {
		switch t := w.(type) {
		case interface{ SetWriteDeadline(time.Time) error }:
			return t.SetWriteDeadline
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return func(time.Time) error { return http.ErrNotSupported }
		}
	}
}

func (cw *clientWriter) fail(err error) {
	if err == nil || cw.err != nil {
		return
	}
	cw.err = err
	cw.stalled = errors.Is(err, os.ErrDeadlineExceeded)
}

// writeError answers with e in p's shape: the API's final interruption event(s) when
// headers went out (no end event), otherwise an HTTP error response.
func (cw *clientWriter) writeError(p sse.Protocol, e *openai.Error, asEvent bool, st protocol.Stream) {
	if asEvent {
		cw.write(protocol.Interruption(p, e, st))
		return
	}
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		retry := "1"
		if e.RetryAfter > 0 {
			retry = strconv.Itoa(e.RetryAfter) // the engine's own
		}
		if cw.w.Header().Get("Retry-After") == "" {
			cw.w.Header().Set("Retry-After", retry)
		}
	}
	cw.status = e.Status
	cw.arm()
	var w http.ResponseWriter = cw.w
	if cw.replay != nil {
		w = heldBody{cw} // a keyed request's error is held too (see keep)
	}
	if cw.rec != nil {
		w = recordedBody{w, cw.rec}
	}
	protocol.WriteError(w, p, e)
	cw.dirty = true
	// The journal keeps the error in one shape (the OpenAI one, see Run.finish); a replay
	// renders it in the API's shape again.
	cw.replay.set(e.AppendJSON(nil))
}

// heldBody is cw's response writer whose body writes are held until cw's next flush: the
// error answer of a keyed request.
type heldBody struct{ cw *clientWriter }

func (h heldBody) Header() http.Header    { return h.cw.w.Header() }
func (h heldBody) WriteHeader(status int) { h.cw.w.WriteHeader(status) }
func (h heldBody) Write(b []byte) (int, error) {
	h.cw.held = append(h.cw.held, b...)
	return len(b), nil
}

// recordedBody is a response writer whose body writes are also recorded for the request's
// trace: the error answer of a request that keeps one.
type recordedBody struct {
	http.ResponseWriter
	rec *trace.Recorder
}

func (r recordedBody) Write(b []byte) (int, error) {
	n, err := r.ResponseWriter.Write(b)
	r.rec.Write(b[:n])
	return n, err
}
