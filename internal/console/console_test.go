package console

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/trace"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestParseFilter(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		query string
		want  store.RecentQuery
		param string // the parameter refused, "" when accepted
	}{
		{"", store.RecentQuery{Limit: DefaultLimit}, ""},
		{"model=m&key=team-a&outcome=rerun&limit=5", store.RecentQuery{Model: "m", Tenant: "team-a", Outcome: store.OutcomeRerun, Limit: 5}, ""},
		{"since=90m", store.RecentQuery{Since: now.Add(-90 * time.Minute), Limit: DefaultLimit}, ""},
		{"since=2030-01-01T00:00:00Z&until=2030-01-02T00:00:00Z",
			store.RecentQuery{Since: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC), Limit: DefaultLimit}, ""},
		{"limit=500", store.RecentQuery{Limit: 500}, ""},
		{"outcome=completed", store.RecentQuery{}, "outcome"},
		{"outcome=running", store.RecentQuery{}, "outcome"},
		{"since=0s", store.RecentQuery{}, "since"},
		{"since=last+week", store.RecentQuery{}, "since"},
		{"until=2030-13-01T00:00:00Z", store.RecentQuery{}, "until"},
		{"since=1h&until=2h", store.RecentQuery{}, "until"},
		{"limit=501", store.RecentQuery{}, "limit"},
		{"limit=ten", store.RecentQuery{}, "limit"},
	} {
		v, _ := url.ParseQuery(tc.query)
		_, q, err := ParseFilter(v, now)
		var fe *FilterError
		switch {
		case tc.param == "" && err != nil:
			t.Errorf("%q: %v", tc.query, err)
		case tc.param != "" && (!errors.As(err, &fe) || fe.Param != tc.param):
			t.Errorf("%q: error %v, want one about %s", tc.query, err, tc.param)
		case tc.param == "" && (q.Model != tc.want.Model || q.Tenant != tc.want.Tenant || q.Outcome != tc.want.Outcome ||
			!q.Since.Equal(tc.want.Since) || !q.Until.Equal(tc.want.Until) || q.Limit != tc.want.Limit):
			t.Errorf("%q: %+v, want %+v", tc.query, q, tc.want)
		}
	}
}

func TestErrorOf(t *testing.T) {
	for _, tc := range []struct {
		body string
		want APIError
	}{
		{`{"error":{"message":"m","type":"upstream_error","code":"upstream_decode_interrupted"}}`, APIError{"upstream_error", "upstream_decode_interrupted", "m"}},
		{`{"error":{"message":"m","type":"t","code":null}}`, APIError{"t", "", "m"}},
		{`{"error":{"message":"m","type":"t","code":429}}`, APIError{"t", "429", "m"}},
		{``, APIError{}},
		{`not json`, APIError{}},
	} {
		if got := ErrorOf([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

// A rerun then interrupted request: the first attempt failed before output, the second
// crossed the boundary and failed. The drawing spans from creation to the last thing the
// record knows; each bar sits at its offsets; the boundary inside the second bar.
func TestTimelineGeometry(t *testing.T) {
	ms := time.Millisecond
	r := &store.Request{ID: "req_1", Model: "m", Tenant: "team-a", Phase: store.PhaseDone, Outcome: store.OutcomeInterrupted,
		FirstDeltaSent: true, FirstDeltaAt: t0.Add(60 * ms), CreatedAt: t0, UpdatedAt: t0.Add(100 * ms),
		Error: []byte(`{"error":{"code":"upstream_decode_interrupted","message":"generation interrupted"}}`),
		Attempts: []store.Attempt{
			{ID: "req_1.a1", N: 1, Replica: "r1", StartedAt: t0, EndedAt: t0.Add(20 * ms), EndReason: "connection_reset", Failure: "dead"},
			{ID: "req_1.a2", N: 2, Replica: "r2", StartedAt: t0.Add(20 * ms), EndedAt: t0.Add(100 * ms), EndReason: "connection_reset", Failure: "dead"},
		}}
	tl := NewTimeline(r, nil, t0.Add(time.Hour))
	if tl.Span != 100*ms || tl.Running {
		t.Fatalf("span %v running %v, want 100ms, ended", tl.Span, tl.Running)
	}
	width := barRight - barLeft
	a1, a2 := tl.Attempts[0], tl.Attempts[1]
	if a1.X != barLeft || a1.W != 0.2*width || a2.X != barLeft+0.2*width || a2.W != 0.8*width {
		t.Errorf("bars at %v+%v and %v+%v", a1.X, a1.W, a2.X, a2.W)
	}
	if a1.Start != 0 || a1.End != 20*ms || a2.Start != 20*ms || a2.End != 100*ms {
		t.Errorf("offsets %v-%v, %v-%v", a1.Start, a1.End, a2.Start, a2.End)
	}
	if tl.Boundary == nil || tl.Boundary.At != 60*ms || tl.Boundary.X != barLeft+0.6*width {
		t.Errorf("boundary %+v, want at 60ms", tl.Boundary)
	}
	if tl.Client.Error.Code != "upstream_decode_interrupted" || tl.Trace != nil {
		t.Errorf("client %+v, trace %+v", tl.Client, tl.Trace)
	}
	if a2.Y <= a1.Y || tl.Height < a2.Y+barHeight {
		t.Errorf("lanes at %v and %v in a drawing %v high", a1.Y, a2.Y, tl.Height)
	}
}

// Without a time in the journal, the trace's boundary is drawn; without either, the page
// says output was delivered and draws no line. A request still running is drawn to now.
func TestTimelineBoundaryAndRunning(t *testing.T) {
	ms := time.Millisecond
	r := &store.Request{ID: "req_2", Phase: store.PhaseDone, Outcome: store.OutcomeCompleted, FirstDeltaSent: true, CreatedAt: t0,
		UpdatedAt: t0.Add(10 * ms), Attempts: []store.Attempt{{N: 1, Replica: "r1", StartedAt: t0, EndedAt: t0.Add(10 * ms), EndReason: "completed"}}}
	doc := &trace.Document{Outcome: trace.Outcome{FirstDeltaAt: t0.Add(5 * ms), EndedAt: t0.Add(10 * ms)},
		Received: trace.Received{Status: 200, Bytes: 12, Chunks: []trace.Chunk{{Text: "data: a\n\n"}, {SHA256: "ab", Bytes: 3}}}}
	if tl := NewTimeline(r, doc, t0); tl.Boundary == nil || tl.Boundary.At != 5*ms || tl.BoundaryUntimed {
		t.Errorf("with a trace: boundary %+v", tl.Boundary)
	} else if tl.Trace == nil || tl.Trace.Hashed != 1 || tl.Trace.Chunks[0].Bytes != 9 || tl.Client.Status != 200 {
		t.Errorf("trace view %+v, client %+v", tl.Trace, tl.Client)
	}
	if tl := NewTimeline(r, nil, t0); tl.Boundary != nil || !tl.BoundaryUntimed {
		t.Errorf("without a trace: boundary %+v, untimed %v", tl.Boundary, tl.BoundaryUntimed)
	}
	running := &store.Request{ID: "req_3", Phase: store.PhaseRouting, CreatedAt: t0, UpdatedAt: t0,
		Attempts: []store.Attempt{{N: 1, Replica: "r1", StartedAt: t0.Add(ms)}}}
	tl := NewTimeline(running, nil, t0.Add(40*ms))
	if !tl.Running || tl.Span != 40*ms || !tl.Attempts[0].Running || tl.Attempts[0].End != 40*ms || tl.Boundary != nil || tl.BoundaryUntimed {
		t.Errorf("running: %+v", tl)
	}
}

// What a client sent is shown as text, never as markup.
func TestPagesEscape(t *testing.T) {
	r := &store.Request{ID: "req_4", Model: `<script>alert(1)</script>`, Phase: store.PhaseDone, Outcome: store.OutcomeFailed, CreatedAt: t0, UpdatedAt: t0,
		Error: []byte(`{"error":{"code":"x","message":"<img src=x onerror=alert(1)>"}}`)}
	doc := &trace.Document{Received: trace.Received{Chunks: []trace.Chunk{{Text: "</pre><script>alert(2)</script>"}}}}
	var b bytes.Buffer
	if err := RenderRequest(&b, NewTimeline(r, doc, t0)); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); strings.Contains(s, "<script>") || strings.Contains(s, "<img") || !strings.Contains(s, "&lt;script&gt;") {
		t.Errorf("not escaped:\n%s", s)
	}
	b.Reset()
	if err := RenderRequests(&b, NewRequestList(Filter{Model: `"><script>`, Limit: 1}, []string{`"><b>`}, []*store.Request{r})); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); strings.Contains(s, "<script>") || strings.Contains(s, `"><b>`) {
		t.Errorf("not escaped:\n%s", s)
	}
}
