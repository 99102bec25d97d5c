package request

import (
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/sse"
)

// passRun is a run of chunks of one read that the machine delivers as they are
// (failover.Machine.Passes): once the boundary is crossed, a read of a busy engine holds
// many chunks that only bear output, and each would cost a step of the machine, a write
// and a re-arm of the deadline. They are stepped as one chunk instead — their classes
// joined, their tokens and sizes summed, their bytes written in one ActWrite — which
// leaves the machine where the chunks one by one would have (docs/design.md §6, "The
// owner loop"). The bytes the client receives are the same.
type passRun struct {
	n      int       // chunks in the run
	class  sse.Class // their classes, joined
	tokens int       // the output tokens they add
	// first is the first chunk's bytes, not copied while it is alone (a read of a paced
	// stream holds one chunk); buf the run's bytes from its second chunk on, from
	// runBuffers, so that a stream waiting for its next token holds none.
	first []byte
	buf   *[]byte
}

// runBuffers holds the bytes of runs between reads.
var runBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// passes reports whether ev, of attempt a, can join the current run: an API whose chunks
// carry nothing the shaper must carry over from one to the next (the Completions APIs:
// no sequence numbers, no output items), a chunk that only bears output, and a machine
// that delivers such a chunk as it is. The run's chunks are not stepped before it ends,
// and stepping them changes none of this.
func (rn *Run) passes(a *Attempt, ev sse.Event) bool {
	return rn.shape.proto == sse.Completions && failover.Passing(ev.Class) && rn.m.Passes(a.n)
}

// pass adds ev, of attempt a, to the run: its tokens counted and its bytes shaped as
// onEvent would.
func (rn *Run) pass(a *Attempt, ev sse.Event) {
	rn.owner.check()
	r := &rn.run
	tokens := a.countTokens(ev)
	rn.shape.note(ev)
	strip := rn.stripsUsage(a, ev)
	switch r.n {
	case 0:
		r.first = rn.shape.event(ev, strip)
	case 1:
		// Copied before the shaper's buffer, which first may be, is reused.
		r.buf = runBuffers.Get().(*[]byte)
		*r.buf = append((*r.buf)[:0], r.first...)
		r.first = nil
		fallthrough
	default:
		*r.buf = rn.shape.appendEvent(*r.buf, ev, strip)
	}
	r.n++
	r.class |= ev.Class
	r.tokens += tokens
}

// endRun steps the run of attempt a as one chunk, received at now, if there is one.
func (rn *Run) endRun(a *Attempt, now time.Time) {
	rn.owner.check()
	r := &rn.run
	if r.n == 0 {
		return
	}
	raw := r.first
	if r.buf != nil {
		raw = *r.buf
	}
	e := failover.Event{Kind: failover.EvChunk, Attempt: a.n, Chunk: r.class, Tokens: r.tokens, Size: len(raw)}
	r.n, r.class, r.tokens, r.first = 0, 0, 0, nil
	rn.shape.raw = raw
	rn.stepAt(e, now)
	rn.shape.raw = nil
	if r.buf != nil {
		if cap(*r.buf) <= maxRunBuffer {
			runBuffers.Put(r.buf)
		}
		r.buf = nil
	}
}

// maxRunBuffer bounds the run buffers kept for reuse: a run of a whole large read is
// rare, and its buffer goes to the collector.
const maxRunBuffer = 64 << 10
