package console

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/trace"
)

// The drawing's geometry, in the SVG's own units: a label column, then the bars from
// barLeft to barRight, one lane per attempt under an axis.
const (
	drawWidth  = 1000
	barLeft    = 220.0
	barRight   = 980.0
	laneTop    = 34.0
	laneHeight = 40.0
	barHeight  = 22.0
	axisRoom   = 30.0
)

// Timeline is one request's record as the console draws it: each attempt on its replica
// from start to end, the delivery boundary, and what the client received.
type Timeline struct {
	ID, Model, Key, Phase, Outcome string
	Stream                         bool
	Owner, IdempotencyKey          string
	CreatedAt, EndAt               time.Time
	// Span is the drawing's length: from CreatedAt to the last thing the record knows.
	Span     time.Duration
	Running  bool
	Attempts []AttemptBar
	// Boundary is where the first output-bearing byte was written; nil when the client
	// received no output.
	Boundary *Boundary
	// BoundaryUntimed: output was delivered, but neither the journal nor a trace says when.
	BoundaryUntimed bool
	Client          Client
	// Trace is the request's trace document's view; nil when it kept none.
	Trace *TraceView
	// Height is the drawing's, Ticks its axis.
	Height float64
	Ticks  []Tick
}

// AttemptBar is one attempt: what the journal says, and where its bar is drawn.
type AttemptBar struct {
	ID, Replica, EndReason, Failure, ModelRevision string
	N                                              int
	LeaseEpoch                                     uint64
	// Start and End are offsets from the request's creation; Running: it has not ended.
	Start, End                                  time.Duration
	Running                                     bool
	CancelSent, CancelAcked, EngineMayHaveActed bool
	X, W, Y, LabelY, ReasonY                    float64
}

// Boundary is the delivery boundary: when the gateway committed to one attempt's answer.
type Boundary struct {
	At time.Duration
	X  float64
	// LabelX and Anchor place the line's label beside it, on the side with room.
	LabelX float64
	Anchor string
}

// Client is what the client received and how its request ended.
type Client struct {
	Outcome               string
	DeliveredOutputTokens int64
	Error                 APIError
	// Status, ContentType and Bytes come from the trace (0 and "" without one).
	Status      int
	ContentType string
	Bytes       int
}

// TraceView is the bytes the client received, as the trace document kept them.
type TraceView struct {
	Bytes  int
	SHA256 string
	Chunks []ChunkView
	// Hashed counts the chunks past the trace's byte limit, kept as hashes only.
	Hashed int
}

// ChunkView is one event (or the whole body) the client received.
type ChunkView struct {
	N      int
	Text   string
	Kept   bool
	SHA256 string
	Bytes  int
}

// Tick is a mark on the drawing's time axis.
type Tick struct {
	X     float64
	Label string
}

// NewTimeline draws request r (with its attempts) and, when it kept one, its trace
// document doc. now is the end of a request still running.
func NewTimeline(r *store.Request, doc *trace.Document, now time.Time) Timeline {
	tl := Timeline{ID: r.ID, Model: r.Model, Key: r.Tenant, Phase: string(r.Phase), Outcome: outcomeText(r.Outcome),
		Stream: r.Stream, Owner: r.Owner, IdempotencyKey: r.IdempotencyKey, CreatedAt: r.CreatedAt,
		Running: r.Outcome == store.OutcomeRunning,
		Client:  Client{Outcome: outcomeText(r.Outcome), DeliveredOutputTokens: r.DeliveredOutputTokens, Error: ErrorOf(r.Error)}}
	end := latest(r.UpdatedAt, r.FirstDeltaAt)
	if doc != nil {
		end = latest(end, doc.Outcome.FirstDeltaAt)
	}
	for _, a := range r.Attempts {
		end = latest(end, a.StartedAt, a.EndedAt)
	}
	if doc != nil {
		end = latest(end, doc.Outcome.EndedAt)
	}
	if tl.Running {
		end = latest(end, now)
	}
	tl.EndAt = end
	tl.Span = max(end.Sub(r.CreatedAt), time.Millisecond)
	x := func(t time.Time) float64 {
		f := float64(t.Sub(r.CreatedAt)) / float64(tl.Span)
		return barLeft + min(max(f, 0), 1)*(barRight-barLeft)
	}
	for i, a := range r.Attempts {
		b := AttemptBar{ID: a.ID, Replica: a.Replica, EndReason: a.EndReason, Failure: a.Failure, ModelRevision: a.ModelRevision,
			N: a.N, LeaseEpoch: a.LeaseEpoch, Start: a.StartedAt.Sub(r.CreatedAt), Running: a.EndedAt.IsZero(),
			CancelSent: a.CancelSent, CancelAcked: a.CancelAcked, EngineMayHaveActed: a.EngineMayHaveActed}
		stop := a.EndedAt
		if b.Running {
			stop = end
		}
		b.End = stop.Sub(r.CreatedAt)
		b.X = x(a.StartedAt)
		b.W = max(x(stop)-b.X, 3) // an attempt that ended at once still shows
		b.Y = laneTop + float64(i)*laneHeight + (laneHeight-barHeight)/2
		b.LabelY = laneTop + float64(i)*laneHeight + 16
		b.ReasonY = b.LabelY + 16
		tl.Attempts = append(tl.Attempts, b)
	}
	// The journal keeps the boundary's time for every request (written synchronously for
	// one with an Idempotency-Key, with the request's next journal batch otherwise); a
	// record written before it did falls back to the trace document's.
	boundary := r.FirstDeltaAt
	if boundary.IsZero() && doc != nil {
		boundary = doc.Outcome.FirstDeltaAt
	}
	switch {
	case !boundary.IsZero():
		b := &Boundary{At: boundary.Sub(r.CreatedAt), X: x(boundary), Anchor: "start"}
		b.LabelX = b.X + 6
		if b.X > barRight-160 {
			b.LabelX, b.Anchor = b.X-6, "end"
		}
		tl.Boundary = b
	case r.FirstDeltaSent:
		tl.BoundaryUntimed = true
	}
	lanes := max(len(r.Attempts), 1)
	tl.Height = laneTop + float64(lanes)*laneHeight + axisRoom
	for i := 0; i <= 4; i++ {
		d := tl.Span * time.Duration(i) / 4
		tl.Ticks = append(tl.Ticks, Tick{X: barLeft + float64(i)/4*(barRight-barLeft), Label: Duration(d)})
	}
	if doc != nil {
		tl.Client.Status, tl.Client.ContentType, tl.Client.Bytes = doc.Received.Status, doc.Received.ContentType, doc.Received.Bytes
		tv := &TraceView{Bytes: doc.Received.Bytes, SHA256: doc.Received.SHA256}
		for i, c := range doc.Received.Chunks {
			cv := ChunkView{N: i + 1, Text: c.Text, Kept: c.Kept(), SHA256: c.SHA256, Bytes: c.Bytes}
			if cv.Kept {
				cv.Bytes = len(c.Text)
			} else {
				tv.Hashed++
			}
			tv.Chunks = append(tv.Chunks, cv)
		}
		tl.Trace = tv
	}
	return tl
}

// latest returns the latest of ts (zero times are unset).
func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// Duration writes an offset on the timeline the way an operator reads it: milliseconds
// below ten seconds, seconds above.
func Duration(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
