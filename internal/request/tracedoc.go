package request

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/trace"
)

// TraceDocumentKind is the kind of the journal's trace record that holds a request's trace
// document (docs/design.md §7, Traces).
const TraceDocumentKind = "document"

// requestTrace is what a request with traces on keeps while it runs, for its trace
// document: the request as received, and a recorder of every byte its client is sent. A
// request with traces off has none (recorder.trace is nil, the client writer's recorder
// too), so it pays nothing per event. The attempts and the outcome are read when the
// request ends, from the records the owner keeps anyway.
type requestTrace struct {
	mode config.TraceMode
	req  trace.Request
	rec  *trace.Recorder
}

// newRequestTrace starts the trace of a request received as r with body, or returns nil
// when mode keeps no trace. Credentials never enter it (trace.RedactHeaders). The body
// was parsed (members are its top-level members), so it is JSON and is neither checked
// nor copied again: nothing writes to a request's body.
func newRequestTrace(mode config.TraceMode, maxBytes int, r *http.Request, body []byte, members openai.Members, stream bool, now time.Time) *requestTrace {
	if mode == "" || mode == config.TracesOff {
		return nil
	}
	return &requestTrace{
		mode: mode,
		req: trace.Request{ReceivedAt: now, Method: r.Method, Path: r.URL.Path, Headers: trace.RedactHeaders(r.Header),
			Body: json.RawMessage(body), Sampling: trace.SamplingOf(members.Get)},
		rec: trace.NewRecorder(maxBytes, stream),
	}
}

// journalTrace journals the request's trace document when its mode keeps it for outcome
// o. It is called before the final update u is submitted: the journal writes a trace
// before the updates submitted after it, so whoever reads the outcome finds the trace.
func (rn *Run) journalTrace(o failover.Outcome, u *store.UpdateRequest, now time.Time) {
	rn.owner.check()
	t := rn.rec.trace
	if t == nil || !t.mode.Keeps(o == failover.Completed) {
		return
	}
	doc := trace.Document{
		Format: trace.Format, RequestID: rn.p.ID, Source: "gateway", Request: t.req,
		Attempts: make([]trace.Attempt, 0, len(rn.atts.all)),
		Received: t.rec.Received(rn.cw.status, rn.cw.w.Header().Get("Content-Type")),
		Outcome: trace.Outcome{Outcome: o.String(), Error: json.RawMessage(u.Error), DeliveredOutputTokens: rn.m.Delivered(),
			FirstDeltaAt: rn.rec.firstDeltaAt, EndedAt: now},
	}
	for _, a := range rn.atts.all {
		ta := trace.Attempt{ID: a.rec.ID, N: a.rec.N, Replica: a.replica, URL: withoutUserinfo(a.url),
			ModelRevision: a.rec.ModelRevision, LeaseEpoch: a.rec.LeaseEpoch, StartedAt: a.rec.StartedAt,
			EndedAt: a.rec.EndedAt, EndReason: a.rec.EndReason, Failure: a.rec.Failure,
			EngineMayHaveActed: a.rec.EngineMayHaveActed}
		if a.usage {
			ta.SentBody = json.RawMessage(rn.shape.usageBody().bytes())
		}
		doc.Attempts = append(doc.Attempts, ta)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		rn.srv.Log().Error("trace document not encoded", "request_id", rn.p.ID, "err", err)
		return
	}
	// The attempt numbers keep counting across a takeover, so the last one numbers this
	// owner's document apart from any earlier owner's; the reader takes the highest.
	seq := int64(rn.p.AttemptBase + len(rn.atts.all))
	rn.srv.Journal().Submit(store.AddTrace{Event: store.TraceEvent{RequestID: rn.p.ID, Seq: seq, At: now, Kind: TraceDocumentKind, Payload: b}})
}

// withoutUserinfo drops credentials written into a replica's URL.
func withoutUserinfo(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}
