package gateway_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/trace"
	"golang.org/x/net/html"
)

// The console's first page lists every replica of every pool with its state, its URL and
// its load, as /readyz shows them to an admin.
func TestConsolePoolsAndReplicas(t *testing.T) {
	sc := newConsoleScene(t, false)
	p := getPage(t, sc.e.admin.URL+"/ui/", "")
	if p.status != 200 || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui/: %d %s", p.status, p.header.Get("Content-Type"))
	}
	ready := send(t, "GET", sc.e.admin.URL+"/readyz", "", "")
	var rz struct {
		Models []struct {
			Model    string `json:"model"`
			Replicas []struct {
				Name  string `json:"name"`
				URL   string `json:"url"`
				State string `json:"state"`
			} `json:"replicas"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(ready.body), &rz); err != nil || len(rz.Models) != 1 || len(rz.Models[0].Replicas) != 2 {
		t.Fatalf("/readyz: %s", ready.body)
	}
	pools := allNodes(p.doc, withAttr("section", "data-model", "sim-model"))
	if len(pools) != 1 {
		t.Fatalf("want one section for sim-model:\n%s", p.body)
	}
	for _, want := range rz.Models[0].Replicas {
		rows := allNodes(pools[0], withAttr("tr", "data-replica", want.Name))
		if len(rows) != 1 {
			t.Fatalf("replica %s: %d rows:\n%s", want.Name, len(rows), p.body)
		}
		row := text(rows[0])
		if st, _ := htmlAttr(rows[0], "data-state"); st != want.State || !strings.Contains(row, want.State) {
			t.Errorf("replica %s shown %q, /readyz says %q", want.Name, row, want.State)
		}
		if !strings.Contains(row, want.URL) || !strings.Contains(row, "outstanding") || !strings.Contains(row, "KV cache") {
			t.Errorf("replica %s: its URL and load are not shown: %q", want.Name, row)
		}
	}
	// A table with headers, for a screen reader; no script anywhere.
	if len(allNodes(p.doc, withAttr("th", "scope", "col"))) < 7 || strings.Contains(p.body, "<script") {
		t.Errorf("the page is not a plain table:\n%s", p.body)
	}
}

// listed is the ids the requests page lists, in its order.
func listed(t *testing.T, base, query string) (page, []string) {
	t.Helper()
	p := getPage(t, base+"/ui/requests"+query, "")
	var ids []string
	for _, tr := range allNodes(p.doc, withAttr("tr", "data-request", "")) {
		id, _ := htmlAttr(tr, "data-request")
		ids = append(ids, id)
	}
	return p, ids
}

// The requests page lists the requests that did not complete plainly — the rerun and the
// interrupted one, not the plain one — newest first, and its filters select by model, key
// id, outcome and time. A filter it cannot apply is a 400 that says which and why.
func TestConsoleRequestsAndFilters(t *testing.T) {
	sc := newConsoleScene(t, false)
	base := sc.e.admin.URL
	before := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	after := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	// Newest first; "rerun" is every request the journal shows with more than one attempt.
	all3 := []string{sc.failed, sc.interrupted, sc.rerun}
	var reruns []string
	for _, id := range all3 {
		if len(sc.recs[id].Attempts) > 1 {
			reruns = append(reruns, id)
		}
	}
	if !slices.Contains(reruns, sc.rerun) || slices.Contains(reruns, sc.interrupted) {
		t.Fatalf("reruns %v", reruns)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", all3},
		{"?outcome=interrupted", []string{sc.interrupted}},
		{"?outcome=rerun", reruns},
		{"?outcome=failed", []string{sc.failed}},
		{"?outcome=cancelled", nil},
		{"?key=team-b", []string{sc.failed, sc.rerun}},
		{"?key=team-a", []string{sc.interrupted}},
		{"?model=sim-model&key=team-a&outcome=interrupted", []string{sc.interrupted}},
		{"?model=other-model", nil},
		{"?since=" + url.QueryEscape(before), all3},
		{"?since=1h", all3},
		{"?since=" + url.QueryEscape(after), nil},
		{"?until=" + url.QueryEscape(before), nil},
		{"?limit=1", []string{sc.failed}},
	} {
		p, ids := listed(t, base, tc.query)
		if p.status != 200 || !slices.Equal(ids, tc.want) {
			t.Errorf("GET /ui/requests%s: %d %v, want %v", tc.query, p.status, ids, tc.want)
		}
	}

	// Each row says what happened, as the journal does.
	p, _ := listed(t, base, "")
	for id, outcome := range map[string]string{sc.interrupted: "interrupted", sc.rerun: "completed", sc.failed: "failed"} {
		rows := allNodes(p.doc, withAttr("tr", "data-request", id))
		if len(rows) != 1 {
			t.Fatalf("%s not listed once", id)
		}
		row, rec := text(rows[0]), sc.recs[id]
		if got, _ := htmlAttr(rows[0], "data-outcome"); got != outcome {
			t.Errorf("%s: outcome %q, want %q", id, got, outcome)
		}
		for _, a := range rec.Attempts {
			if !strings.Contains(row, a.Replica) {
				t.Errorf("%s: replica %s not in %q", id, a.Replica, row)
			}
		}
		if code := rec.errorCode(); code != "" && !strings.Contains(row, code) {
			t.Errorf("%s: error code %s not in %q", id, code, row)
		}
		if links := allNodes(rows[0], withAttr("a", "href", "/ui/requests/"+id)); len(links) != 1 {
			t.Errorf("%s: no link to its page", id)
		}
	}

	for _, tc := range []struct{ query, param string }{
		{"?outcome=completed", "outcome"}, {"?since=yesterday", "since"}, {"?until=-1h", "until"},
		{"?limit=0", "limit"}, {"?limit=100000", "limit"},
		{"?since=" + url.QueryEscape(after) + "&until=" + url.QueryEscape(before), "until"},
	} {
		p, ids := listed(t, base, tc.query)
		alerts := allNodes(p.doc, withAttr("", "role", "alert"))
		if p.status != 400 || len(ids) != 0 || len(alerts) != 1 {
			t.Errorf("GET /ui/requests%s: %d, %d rows, %d alerts; want 400 with the reason", tc.query, p.status, len(ids), len(alerts))
			continue
		}
		if got, _ := htmlAttr(alerts[0], "data-param"); got != tc.param {
			t.Errorf("GET /ui/requests%s: the alert names %q, want %q: %s", tc.query, got, tc.param, text(alerts[0]))
		}
	}
}

// attemptsDrawn are the attempts of the drawing (the SVG's groups) and of the table beside
// it, as (n, replica, end reason) — the end reason from the drawing's label.
func attemptsDrawn(t *testing.T, doc *html.Node) (drawn, tabled [][3]string) {
	t.Helper()
	for _, g := range allNodes(doc, withAttr("g", "data-attempt", "")) {
		n, _ := htmlAttr(g, "data-attempt")
		rep, _ := htmlAttr(g, "data-replica")
		reason, _ := htmlAttr(g, "data-end-reason")
		if len(allNodes(g, func(n *html.Node) bool { return n.Data == "rect" })) != 1 {
			t.Errorf("attempt %s on %s has no bar", n, rep)
		}
		drawn = append(drawn, [3]string{n, rep, reason})
	}
	for _, tr := range allNodes(doc, withAttr("tr", "data-attempt", "")) {
		n, _ := htmlAttr(tr, "data-attempt")
		rep, _ := htmlAttr(tr, "data-replica")
		cells := allNodes(tr, func(n *html.Node) bool { return n.Data == "td" })
		reason := ""
		if len(cells) > 3 {
			reason = text(cells[3])
		}
		tabled = append(tabled, [3]string{n, rep, reason})
	}
	return drawn, tabled
}

// A request's page draws each attempt on its replica with its end reason, the delivery
// boundary when output was delivered, how the client's request ended with its error code,
// and the trace's bytes with a link that downloads the trace document.
func TestConsoleRequestTimeline(t *testing.T) {
	sc := newConsoleScene(t, false)
	base := sc.e.admin.URL
	for _, id := range []string{sc.rerun, sc.interrupted, sc.failed} {
		rec := sc.recs[id]
		p := getPage(t, base+"/ui/requests/"+id, "")
		if p.status != 200 {
			t.Fatalf("GET /ui/requests/%s: %d %s", id, p.status, p.body)
		}
		var want [][3]string
		for _, a := range rec.Attempts {
			reason := a.EndReason
			if reason == "" {
				reason = "—"
			}
			want = append(want, [3]string{itoa(a.N), a.Replica, reason})
		}
		drawn, tabled := attemptsDrawn(t, p.doc)
		for i := range drawn {
			if drawn[i][2] == "" {
				drawn[i][2] = "—"
			}
		}
		if !slices.Equal(drawn, want) || !slices.Equal(tabled, want) {
			t.Errorf("%s: attempts drawn %v, in the table %v; the journal has %v", id, drawn, tabled, want)
		}
		if boundary := allNodes(p.doc, withAttr("g", "data-boundary", "")); (len(boundary) == 1) != rec.FirstDeltaSent {
			t.Errorf("%s: %d boundary lines, first_delta_sent %v", id, len(boundary), rec.FirstDeltaSent)
		}
		if got := allNodes(p.doc, withAttr("dd", "data-outcome", rec.Outcome)); len(got) != 2 {
			t.Errorf("%s: outcome %s is not shown for the request and its client", id, rec.Outcome)
		}
		codes := allNodes(p.doc, withAttr("dd", "data-error-code", ""))
		switch code := rec.errorCode(); {
		case code == "" && len(codes) != 0:
			t.Errorf("%s completed, but the page shows an error: %s", id, text(codes[0]))
		case code != "" && (len(codes) != 1 || !strings.Contains(text(codes[0]), code)):
			t.Errorf("%s ended with %s; the page shows %d error codes", id, code, len(codes))
		}
		if id == sc.interrupted && rec.errorCode() != "upstream_decode_interrupted" {
			t.Errorf("the interrupted request ended with %q, want upstream_decode_interrupted", rec.errorCode())
		}

		// The trace: the bytes the client received, and its document to download.
		tr := send(t, "GET", base+"/admin/requests/"+id+"/trace", "", "")
		var doc trace.Document
		if tr.status != 200 || json.Unmarshal([]byte(tr.body), &doc) != nil {
			t.Fatalf("%s: trace %d %s", id, tr.status, tr.body)
		}
		sections := allNodes(p.doc, withAttr("section", "class", "trace"))
		if len(sections) != 1 || !strings.Contains(text(sections[0]), itoa(doc.Received.Bytes)+" bytes") {
			t.Fatalf("%s: the trace's %d bytes are not shown", id, doc.Received.Bytes)
		}
		chunks := allNodes(sections[0], func(n *html.Node) bool { return n.Data == "pre" })
		if len(chunks) != len(doc.Received.Chunks) || len(chunks) == 0 {
			t.Fatalf("%s: %d chunks shown, the trace has %d", id, len(chunks), len(doc.Received.Chunks))
		}
		for i, c := range doc.Received.Chunks {
			// A <pre>'s first newline is dropped by the parser, as HTML says.
			if got := chunks[i].FirstChild; got == nil || strings.TrimPrefix(c.Text, "\n") != got.Data {
				t.Errorf("%s: chunk %d shown %q, the client received %q", id, i, got, c.Text)
			}
		}
		links := allNodes(sections[0], withAttr("a", "download", ""))
		if len(links) != 1 {
			t.Fatalf("%s: no download link", id)
		}
		href, _ := htmlAttr(links[0], "href")
		dl := send(t, "GET", base+href, "", "")
		if dl.status != 200 || dl.body != tr.body || !strings.Contains(dl.header.Get("Content-Disposition"), id+".trace.json") {
			t.Errorf("%s: download %s: %d %q, want the trace document as a file", id, href, dl.status, dl.header.Get("Content-Disposition"))
		}
	}

	// An unknown id is a 404 page that says so.
	p := getPage(t, base+"/ui/requests/req_01J00000000000000000000000", "")
	if codes := allNodes(p.doc, withAttr("", "data-error-code", "request_not_found")); p.status != 404 || len(codes) != 1 {
		t.Errorf("unknown request: %d %s", p.status, p.body)
	}
}

// On a shared listener the console answers admin keys only: a browser sends the key as the
// password of HTTP Basic authentication, and is asked for it.
func TestConsoleOnSharedListener(t *testing.T) {
	sc := newConsoleScene(t, true)
	base := sc.e.srv.URL
	basic := func(user, pass, path string) answer {
		t.Helper()
		u, _ := url.Parse(base + path)
		u.User = url.UserPassword(user, pass)
		return send(t, "GET", u.String(), "", "")
	}
	for _, path := range []string{"/ui/", "/ui/requests", "/ui/requests/" + sc.interrupted, "/ui/requests/" + sc.interrupted + "/trace"} {
		if a := send(t, "GET", base+path, "", ""); a.status != 401 || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s without a key: %d, WWW-Authenticate %q", path, a.status, a.header.Get("WWW-Authenticate"))
		}
		if a := basic("ops", consoleKeyA, path); a.status != 403 {
			t.Errorf("%s with a tenant key: %d", path, a.status)
		}
		if a := basic("anyone", "not-a-key", path); a.status != 401 {
			t.Errorf("%s with an unknown key: %d", path, a.status)
		}
		if a := basic("ops", consoleKeyAdmin, path); a.status != 200 {
			t.Errorf("%s with the admin key as Basic password: %d %.300s", path, a.status, a.body)
		}
		if a := send(t, "GET", base+path, consoleKeyAdmin, ""); a.status != 200 {
			t.Errorf("%s with the admin key as bearer: %d", path, a.status)
		}
	}
	// The console is the operator's: a tenant's key cannot list even its own requests.
	if a := send(t, "GET", base+"/ui/requests?key=team-a", consoleKeyA, ""); a.status != 403 {
		t.Errorf("a tenant listing its requests: %d", a.status)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
