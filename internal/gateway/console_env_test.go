package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"golang.org/x/net/html"
)

// The console's tests (console_test.go, console_browser_test.go) share a gateway in front
// of two simulated replicas (sim-1 serving first) that has run a plain request, a request
// rerun on sim-2 after sim-1 reset it before any output, a request interrupted after its
// first output, and one that every replica answered 500 before any output.

const (
	consoleKeyA     = "console-team-a-0123456789"
	consoleKeyB     = "console-team-b-0123456789"
	consoleKeyAdmin = "console-operator-0123456789"
)

type consoleScene struct {
	e                         *env
	plain, rerun, interrupted string
	// failed failed on every replica before any output.
	failed string
	// recs are the journal's records of the three, as GET /v1/requests/{id} shows them.
	recs map[string]requestRecord
}

// consoleAuth is the keys of the console's gateway: two tenants and an operator.
func consoleAuth(c *config.Config) {
	c.Auth.Keys = []config.APIKey{{ID: "team-a", Key: consoleKeyA}, {ID: "team-b", Key: consoleKeyB}}
	c.Auth.AdminKeys = []config.APIKey{{ID: "ops", Key: consoleKeyAdmin}}
	c.Traces.Mode = config.TracesAll
	c.Models[0].Replicas[1].Priority = 1
}

// newConsoleScene starts the gateway (with admin_listen on loopback unless oneListener)
// and runs the three requests.
func newConsoleScene(t *testing.T, oneListener bool) *consoleScene {
	t.Helper()
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		consoleAuth(c)
		if oneListener {
			c.AdminListen = ""
		}
	}})
	sc := &consoleScene{e: e, recs: map[string]requestRecord{}}
	stream := func(key, fault string, wantStatus int) string {
		body := `{"model":"sim-model","max_tokens":6,"ignore_eos":true,"stream":true,"messages":[{"role":"user","content":"tell me a story"}]}`
		var hdr []string
		if fault != "" {
			hdr = []string{"X-Sim-Fault", fault}
		}
		a := send(t, "POST", e.srv.URL+"/v1/chat/completions", key, body, hdr...)
		if a.status != wantStatus {
			t.Fatalf("request with fault %q: %d %s", fault, a.status, a.body)
		}
		id := a.header.Get("X-Request-Id")
		sc.recs[id] = sc.record(t, id)
		return id
	}
	// The rerun before the interruption: sim-1 must take its first attempt.
	sc.plain = stream(consoleKeyA, "", 200)
	sc.rerun = stream(consoleKeyB, "reset@prefill;on=sim-1", 200)
	sc.interrupted = stream(consoleKeyA, "reset@sent:2", 200)
	sc.failed = stream(consoleKeyB, "status:500@accept", 500)

	if r := sc.recs[sc.plain]; r.Outcome != "completed" || len(r.Attempts) != 1 {
		t.Fatalf("the plain request: %+v", r)
	}
	if r := sc.recs[sc.rerun]; r.Outcome != "completed" || len(r.Attempts) != 2 || r.Attempts[0].Replica != "sim-1" || r.Attempts[1].Replica != "sim-2" {
		t.Fatalf("the rerun request: %+v", r)
	}
	if r := sc.recs[sc.interrupted]; r.Outcome != "interrupted" || !r.FirstDeltaSent || len(r.Attempts) != 1 {
		t.Fatalf("the interrupted request: %+v", r)
	}
	if r := sc.recs[sc.failed]; r.Outcome != "failed" || r.FirstDeltaSent || r.errorCode() == "" {
		t.Fatalf("the failed request: %+v", r)
	}
	return sc
}

// record reads the journal's record of id once the request is done, as an admin.
func (sc *consoleScene) record(t *testing.T, id string) requestRecord {
	t.Helper()
	a := send(t, "GET", sc.e.srv.URL+"/v1/requests/"+id+"?wait=20s", consoleKeyAdmin, "")
	var r requestRecord
	if a.status != 200 || json.Unmarshal([]byte(a.body), &r) != nil || r.Phase != "done" {
		t.Fatalf("GET /v1/requests/%s: %d %s", id, a.status, a.body)
	}
	return r
}

// errorCode is the code of the error a record ended with.
func (r requestRecord) errorCode() string {
	var e struct {
		Code string `json:"code"`
	}
	json.Unmarshal(r.Error, &e)
	return e.Code
}

// page is a console page as a client received it, parsed.
type page struct {
	status int
	header http.Header
	body   string
	doc    *html.Node
}

// getPage GETs url, with key as the bearer key when set, and parses the answer as HTML.
func getPage(t *testing.T, url, key string) page {
	t.Helper()
	a := send(t, "GET", url, key, "")
	doc, err := html.Parse(strings.NewReader(a.body))
	if err != nil {
		t.Fatalf("GET %s: not HTML: %v", url, err)
	}
	return page{status: a.status, header: a.header, body: a.body, doc: doc}
}

// all returns the elements of n's tree for which match holds, in document order.
func allNodes(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && match(c) {
			out = append(out, c)
		}
	}
	return out
}

// withAttr matches the elements named tag (any when "") that carry attribute key (with
// value val, when val is not "").
func withAttr(tag, key, val string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		if tag != "" && n.Data != tag {
			return false
		}
		v, ok := htmlAttr(n, key)
		return ok && (val == "" || v == val)
	}
}

func htmlAttr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// text is the text of n's tree, its spaces collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
