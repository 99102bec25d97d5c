package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/trace"
)

// The wire judge against gateways that break the contract: each test proxy stands between
// the sweep's client and the real simulated replicas (it is the sweep's --target, its
// replicas' URLs handed to it by Prepare) and breaks one rule; the sweep must flag the
// case with that rule, and write a trace that reads back to what the client received.

// badProxy forwards a request without X-Sim-Fault (the sweep's readiness probe) to the
// first replica as it is; a case's request, which carries one, goes to behave.
type badProxy struct {
	t      *testing.T
	srv    *httptest.Server
	behave func(p *badProxy, w *recordingWriter, r *http.Request, body []byte)
	client *http.Client

	// cases counts the case requests still being handled: a handler may outlive its
	// client (keepDecoding), and what it wrote is recorded when it returns.
	cases sync.WaitGroup

	mu       sync.Mutex
	replicas []ReplicaEnv
	body     []byte // the last case request's body, as the client sent it
	sent     []byte // what the proxy wrote to that request's client
	status   int    // and with what status and content type
	ctype    string
}

func newBadProxy(t *testing.T, behave func(p *badProxy, w *recordingWriter, r *http.Request, body []byte)) *badProxy {
	p := &badProxy{t: t, behave: behave, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// prepare is the sweep's Prepare: it takes the replicas' URLs.
func (p *badProxy) prepare(_ context.Context, env TargetEnv) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replicas = env.Replicas
	return nil
}

func (p *badProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rw := &recordingWriter{w: w}
	if r.Header.Get("X-Sim-Fault") == "" {
		resp, err := p.open(r.Context(), 0, r, body, false)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		rw.start(resp)
		_, _ = io.Copy(rw, resp.Body)
		return
	}
	p.cases.Add(1)
	defer p.cases.Done()
	p.behave(p, rw, r, body)
	p.mu.Lock()
	p.body, p.sent, p.status, p.ctype = body, rw.buf.Bytes(), rw.status, rw.ctype
	p.mu.Unlock()
}

// open sends the client's request to replica i (from 0), its X-Sim-Fault header with it
// when fault is set.
func (p *badProxy) open(ctx context.Context, i int, r *http.Request, body []byte, fault bool) (*http.Response, error) {
	p.mu.Lock()
	url := p.replicas[i].URL
	p.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if fault {
		req.Header.Set("X-Sim-Fault", r.Header.Get("X-Sim-Fault"))
	}
	return p.client.Do(req)
}

// proxied is what the proxy received and sent for a case.
type proxied struct {
	body, sent []byte
	status     int
	ctype      string
}

// caseRequest is what the proxy received and sent for the last case, once its handler
// has returned.
func (p *badProxy) caseRequest() proxied {
	p.cases.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return proxied{p.body, p.sent, p.status, p.ctype}
}

// recordingWriter writes through to the client, flushing every write, and keeps a copy.
type recordingWriter struct {
	w      http.ResponseWriter
	buf    bytes.Buffer
	status int
	ctype  string
}

func (rw *recordingWriter) start(resp *http.Response) {
	rw.writeHeader(resp.StatusCode, resp.Header.Get("Content-Type"))
}

func (rw *recordingWriter) writeHeader(status int, ctype string) {
	rw.status, rw.ctype = status, ctype
	rw.w.Header().Set("Content-Type", ctype)
	rw.w.WriteHeader(status)
}

func (rw *recordingWriter) Write(b []byte) (int, error) {
	rw.buf.Write(b)
	n, err := rw.w.Write(b)
	if f, ok := rw.w.(http.Flusher); ok {
		f.Flush()
	}
	return n, err
}

// sseEvents reads a server-sent stream one event (through its blank line) at a time.
type sseEvents struct{ br *bufio.Reader }

func readEvents(r io.Reader) *sseEvents { return &sseEvents{bufio.NewReader(r)} }

// next is the next whole event; a stream cut inside an event ends it (io.ErrUnexpectedEOF).
func (e *sseEvents) next() (string, error) {
	var b strings.Builder
	for {
		line, err := e.br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			if err == io.EOF && b.Len() == 0 {
				return "", io.EOF
			}
			return "", io.ErrUnexpectedEOF
		}
		if line == "\n" || line == "\r\n" {
			return b.String(), nil
		}
	}
}

// hasText reports whether an event of a stream on path carries output text.
func hasText(path, ev string) bool { return len(readEvent(path, ev).text) > 0 }

// isDone reports whether an event is the stream's [DONE].
func isDone(ev string) bool { return strings.TrimSpace(ev) == "data: [DONE]" }

// forward copies events of resp to rw until the stream ends; it returns the text events
// it forwarded and whether the stream reached [DONE].
func forward(path string, rw io.Writer, resp *http.Response) (texts []string, done bool) {
	defer resp.Body.Close()
	evs := readEvents(resp.Body)
	for {
		ev, err := evs.next()
		if err != nil {
			return texts, false
		}
		_, _ = io.WriteString(rw, ev)
		if hasText(path, ev) {
			texts = append(texts, ev)
		}
		if isDone(ev) {
			return texts, true
		}
	}
}

// passThrough forwards the first replica's stream as it comes and ends the response
// when it ends, however it ends: a plain reverse proxy.
func passThrough(p *badProxy, rw *recordingWriter, r *http.Request, body []byte) {
	resp, err := p.open(r.Context(), 0, r, body, true)
	if err != nil {
		return
	}
	rw.start(resp)
	forward(r.URL.Path, rw, resp)
}

// resumeElsewhere forwards the first replica's stream; when it breaks off, it asks the
// second replica and forwards its answer from the token the client had reached: a splice.
func resumeElsewhere(p *badProxy, rw *recordingWriter, r *http.Request, body []byte) {
	resp, err := p.open(r.Context(), 0, r, body, true)
	if err != nil {
		return
	}
	rw.start(resp)
	texts, done := forward(r.URL.Path, rw, resp)
	if done {
		return
	}
	resp, err = p.open(r.Context(), 1, r, body, false)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	evs := readEvents(resp.Body)
	skip := len(texts)
	for {
		ev, err := evs.next()
		if err != nil {
			return
		}
		if hasText(r.URL.Path, ev) && skip > 0 {
			skip--
			continue
		}
		_, _ = io.WriteString(rw, ev)
	}
}

// retrySame forwards the first replica's stream; when it breaks off, it sends the request
// to the same replica again and forwards the new answer from its start: a repeat.
func retrySame(p *badProxy, rw *recordingWriter, r *http.Request, body []byte) {
	resp, err := p.open(r.Context(), 0, r, body, true)
	if err != nil {
		return
	}
	rw.start(resp)
	if _, done := forward(r.URL.Path, rw, resp); done {
		return
	}
	resp, err = p.open(r.Context(), 0, r, body, false)
	if err != nil {
		return
	}
	forward(r.URL.Path, rw, resp)
}

// rerunQuietly forwards the first replica's stream; when it breaks off, it runs the
// request again on the second replica (and throws the answer away) before it tells the
// client the answer failed: the client sees a proper interruption, the replicas a rerun
// after output.
func rerunQuietly(p *badProxy, rw *recordingWriter, r *http.Request, body []byte) {
	resp, err := p.open(r.Context(), 0, r, body, true)
	if err != nil {
		return
	}
	rw.start(resp)
	if _, done := forward(r.URL.Path, rw, resp); done {
		return
	}
	if resp, err = p.open(r.Context(), 1, r, body, false); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	_, _ = io.WriteString(rw, `data: {"error":{"message":"the answer broke off","type":"upstream_error","code":"interrupted"}}`+"\n\n")
}

// keepDecoding forwards the first replica's stream on a request of its own, not the
// client's: when the client leaves, the replica decodes on to the end, read and dropped.
func keepDecoding(p *badProxy, rw *recordingWriter, r *http.Request, body []byte) {
	resp, err := p.open(context.WithoutCancel(r.Context()), 0, r, body, true)
	if err != nil {
		return
	}
	rw.start(resp)
	forward(r.URL.Path, rw, resp)
}

func TestWireJudgeFlagsBrokenGateways(t *testing.T) {
	for _, tc := range []struct {
		name, action, point string
		behave              func(p *badProxy, w *recordingWriter, r *http.Request, body []byte)
		rule                string
		only                bool // the rule is the only one broken
	}{
		{"splice", "crash", "sent:2", resumeElsewhere, vSplice, false},
		{"silent end", "crash", "sent:2", passThrough, vSilentEnd, true},
		{"repeat", "reset", "sent:2", retrySame, vRepeat, false},
		{"rerun after output", "crash", "sent:2", rerunQuietly, vRerunAfterOutput, true},
		{"replica left decoding", "leave", "sent:2", keepDecoding, vZombie, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := newBadProxy(t, tc.behave)
			dir := t.TempDir()
			rep, err := RunSweep(ctx, SweepConfig{Target: p.srv.URL, Tokens: 4, Actions: []string{tc.action}, Points: []string{tc.point},
				Traces: dir, Prepare: p.prepare, ReadyTimeout: 10 * time.Second,
				// Slow enough that the client has each token well before the next exists.
				DecodePerToken: 25 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Cases) != 1 {
				t.Fatalf("%d cases, want 1", len(rep.Cases))
			}
			c := rep.Cases[0]
			var rules []string
			for _, v := range c.Violations {
				rules = append(rules, v.rule)
				t.Log(v)
			}
			if !slices.Contains(rules, tc.rule) {
				t.Fatalf("%s@%s through the %s proxy: violations %q, want %s", tc.action, tc.point, tc.name, rules, tc.rule)
			}
			if tc.only && slices.ContainsFunc(rules, func(r string) bool { return r != tc.rule }) {
				t.Errorf("violations %q, want %s alone", rules, tc.rule)
			}
			if rep.Violating() != 1 || !strings.Contains(rep.Table(), strings.ToUpper(tc.rule)) || !strings.Contains(rep.Summary(), "1 violating") {
				t.Errorf("the report does not show the violation:\n%s%s", rep.Table(), rep.Summary())
			}
			if len(c.Traces) != len(c.Violations) {
				t.Fatalf("%d traces for %d violations", len(c.Traces), len(c.Violations))
			}
			got := p.caseRequest()
			for i, path := range c.Traces {
				checkTraceFile(t, path, c, c.Violations[i], got, tc.action == "leave")
			}
		})
	}
}

// rerunBeforeText is a gateway that takes only text for output: it holds a stream's events
// back until the first text (or the stream's end or error), and while it has sent the
// client nothing it reruns a failed request on the second replica, as nginx's
// proxy_next_upstream does. An engine-run tool's announcement is not text to it, so a
// request whose first replica ran the tool and then failed runs on the second as well,
// and the client gets the second replica's answer, whole and unspliced.
func rerunBeforeText(p *badProxy, rw *recordingWriter, r *http.Request, body []byte) {
	if resp, err := p.open(r.Context(), 0, r, body, true); err == nil {
		if sent := forwardUnlessFailed(r.URL.Path, rw, resp); sent {
			return
		}
	}
	resp, err := p.open(r.Context(), 1, r, body, false)
	if err != nil {
		return
	}
	rw.start(resp)
	_, _ = io.Copy(rw, resp.Body)
	resp.Body.Close()
}

// forwardUnlessFailed forwards resp once it has shown output text, an end or an error (a
// whole answer: once it is read whole), and reports whether it sent the client anything;
// a response that failed before that is dropped unsent.
func forwardUnlessFailed(path string, rw *recordingWriter, resp *http.Response) bool {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return false
		}
		rw.start(resp)
		_, _ = rw.Write(b)
		return true
	}
	var held []string
	evs := readEvents(resp.Body)
	for {
		ev, err := evs.next()
		if err != nil {
			return false
		}
		held = append(held, ev)
		if w := readEvent(path, ev); len(w.text) > 0 || w.end || w.err {
			break
		}
	}
	rw.start(resp)
	for _, ev := range held {
		_, _ = io.WriteString(rw, ev)
	}
	_, _ = io.Copy(rw, resp.Body)
	return true
}

// failPlainly forwards the first replica's answer; when the replica fails before a whole
// answer's status it answers 502 with an error of its own that says nothing of a tool,
// which a client reads as "try again". A stream it passes through as it comes.
func failPlainly(p *badProxy, rw *recordingWriter, r *http.Request, body []byte) {
	resp, err := p.open(r.Context(), 0, r, body, true)
	if err != nil {
		rw.writeHeader(http.StatusBadGateway, "application/json")
		_, _ = io.WriteString(rw, `{"error":{"message":"the upstream failed","type":"upstream_error","code":"bad_gateway"}}`)
		return
	}
	defer resp.Body.Close()
	rw.start(resp)
	_, _ = io.Copy(rw, resp.Body)
}

// The tool rules against gateways that break them: a Responses request whose engine runs
// an mcp tool, the first replica crashing right after the tool ran (crash@tool:1), streamed
// and whole. A gateway that reruns it on the second replica runs the tool twice, however
// whole and clean the answer its client gets; one that fails a whole answer with an error
// that invites a retry hides that the tool ran.
func TestWireJudgeFlagsEngineToolRerun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		behave func(p *badProxy, w *recordingWriter, r *http.Request, body []byte)
		// The one rule each case breaks, and the tool's calls, stream then whole.
		rules [2]string
		calls [2]int
	}{
		{"rerun before text", rerunBeforeText, [2]string{vToolTwice, vToolTwice}, [2]int{2, 2}},
		{"plain error", failPlainly, [2]string{vSilentEnd, vToolError}, [2]int{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := newBadProxy(t, tc.behave)
			dir := t.TempDir()
			var progress strings.Builder
			rep, err := RunSweep(ctx, SweepConfig{Target: p.srv.URL, Tokens: 4, Points: []string{toolPoint}, ToolActions: []string{"crash"},
				Traces: dir, Prepare: p.prepare, ReadyTimeout: 10 * time.Second, Progress: &progress})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s%s%s", progress.String(), rep.Table(), rep.Summary())
			if len(rep.Cases) != 2 || rep.Cases[0].Whole || !rep.Cases[1].Whole {
				t.Fatalf("%d cases, want crash@tool:1 streamed and whole", len(rep.Cases))
			}
			for i, c := range rep.Cases {
				var rules []string
				for _, v := range c.Violations {
					rules = append(rules, v.rule)
					t.Log(v)
				}
				if len(rules) != 1 || rules[0] != tc.rules[i] {
					t.Errorf("%s@%s through the %s proxy: violations %q, want %s alone", c.Action, c.Row(), tc.name, rules, tc.rules[i])
				}
				if c.ToolCalls != tc.calls[i] || c.Missed {
					t.Errorf("%s@%s: the tool server counted %d calls (missed %v), want %d", c.Action, c.Row(), c.ToolCalls, c.Missed, tc.calls[i])
				}
				if len(c.Traces) != len(c.Violations) {
					t.Fatalf("%d traces for %d violations", len(c.Traces), len(c.Violations))
				}
			}
			if rep.Violating() != 2 || !strings.Contains(rep.Table(), strings.ToUpper(tc.rules[1])) {
				t.Errorf("the report does not show the violations:\n%s%s", rep.Table(), rep.Summary())
			}
			// The last case's trace reads back to what the proxy sent its client.
			last := rep.Cases[1]
			checkTraceFile(t, last.Traces[0], last, last.Violations[0], p.caseRequest(), false)
		})
	}
}

// checkTraceFile checks a violation's trace: a trace.Document that fencegate replay can
// resend (the path, body and fault header the client sent) and whose Received reads back
// to what the proxy wrote to the client (a prefix of it when the client left).
func checkTraceFile(t *testing.T, path string, c CaseResult, v violation, got proxied, left bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc trace.Document
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: not a trace document: %v", path, err)
	}
	if doc.Format != trace.Format || doc.Source != "chaos" || doc.RequestID == "" || !strings.HasPrefix(doc.Note, v.rule+":") {
		t.Errorf("%s: format %q, source %q, request id %q, note %q", path, doc.Format, doc.Source, doc.RequestID, doc.Note)
	}
	body, sent := got.body, got.sent
	rq := doc.Request
	wantPath := "/v1/chat/completions"
	if c.Point == toolPoint {
		wantPath = "/v1/responses"
	}
	if rq.Method != http.MethodPost || rq.Path != wantPath || rq.Headers.Get("X-Sim-Fault") != c.Fault || c.Fault == "" {
		t.Errorf("%s: request %s %s, X-Sim-Fault %q, want POST %s and %q", path, rq.Method, rq.Path, rq.Headers.Get("X-Sim-Fault"), wantPath, c.Fault)
	}
	if !jsonEqual(rq.Body, body) {
		t.Errorf("%s: body %s, the client sent %s", path, rq.Body, body)
	}
	if string(rq.Sampling["model"]) != `"sim-model"` || len(doc.Attempts) == 0 || doc.Attempts[0].Replica != Faulted || doc.Attempts[0].URL == "" {
		t.Errorf("%s: sampling %s, attempts %+v", path, rq.Sampling, doc.Attempts)
	}
	var received strings.Builder
	for _, ch := range doc.Received.Chunks {
		if !ch.Kept() {
			t.Fatalf("%s: a chunk kept only as a hash", path)
		}
		received.WriteString(ch.Text)
	}
	if left {
		if !bytes.HasPrefix(sent, []byte(received.String())) || received.Len() == 0 {
			t.Errorf("%s: received %q, not a prefix of what the proxy wrote, %q", path, received.String(), sent)
		}
		return
	}
	sum := sha256.Sum256(sent)
	if received.String() != string(sent) || doc.Received.Bytes != len(sent) || doc.Received.SHA256 != hex.EncodeToString(sum[:]) ||
		doc.Received.Status != got.status || doc.Received.ContentType != got.ctype {
		t.Errorf("%s: received %d bytes (status %d, %s, sha256 %s) %q; the proxy wrote %d (status %d, %s): %q", path, doc.Received.Bytes,
			doc.Received.Status, doc.Received.ContentType, doc.Received.SHA256, received.String(), len(sent), got.status, got.ctype, sent)
	}
	rec := trace.NewRecorder(1<<20, strings.Contains(got.ctype, "text/event-stream"))
	rec.Write(sent)
	original := trace.Read(rq.Path, rec.Received(got.status, got.ctype))
	fromDoc := trace.Read(rq.Path, doc.Received)
	// The same text, finishes and end: identical, or the same failure at the same point.
	if cmp := trace.Compare(original, fromDoc); !cmp.Agrees() || cmp.Verdict == trace.Extends || original.End != fromDoc.End {
		t.Errorf("%s: the trace reads back as %s (%s, %s): %s", path, cmp.Verdict, original.End, fromDoc.End, cmp.Detail)
	}
	if (got.status == http.StatusOK && len(fromDoc.Choices) == 0) || fromDoc.End == trace.EndComplete && v.rule == vSilentEnd {
		t.Errorf("%s: transcript %+v", path, fromDoc)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// A bounded sweep against fencegate in-process: every action at the first points of a
// short answer (before the request reached the engine, with the first token computed but
// not sent, and with it sent), and right after the engine ran an mcp tool of a Responses
// request, streamed and whole, in direct mode and in fenced mode with partitions. Every
// case runs, its fault comes into play, and none breaks a rule.
//
// The tool cases end as docs/design.md §5 says: the tool ran once, and was not run again;
// a stream, whose call the engine announced before it ran it, is interrupted (the
// announcement was output), a whole answer fails before any output, and a client that
// left has left.
func TestSweepFencegate(t *testing.T) {
	points := []string{"accept", "computed:1", "sent:1", toolPoint}
	for _, fenced := range []bool{false, true} {
		name := "direct"
		if fenced {
			name = "fenced"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var progress strings.Builder
			rep, err := RunSweep(ctx, SweepConfig{Fenced: fenced, Tokens: 2, Points: points, Progress: &progress})
			if err != nil {
				t.Fatal(err)
			}
			actions := append(append([]string(nil), replicaActions...), clientActions...)
			if fenced {
				actions = append(actions, "partition")
			}
			toolActions := slices.DeleteFunc(slices.Clone(actions), func(a string) bool { return a == "stall" })
			ran := map[string]int{}
			for _, c := range rep.Cases {
				ran[c.Action+"@"+c.Row()]++
				if c.Missed {
					t.Errorf("case %d %s@%s: its fault never came into play in %d tries", c.N, c.Action, c.Row(), c.Tries)
				}
				for _, v := range c.Violations {
					t.Errorf("case %d %s@%s: %s", c.N, c.Action, c.Row(), v)
				}
				if c.Point != toolPoint {
					if c.ToolCalls != 0 {
						t.Errorf("case %d %s@%s: %d calls of the tool server, for a request with no tool", c.N, c.Action, c.Row(), c.ToolCalls)
					}
					continue
				}
				want := endInterrupted
				switch {
				case c.Action == "leave":
					want = endLeft
				case c.Whole:
					want = endError
				}
				if c.ToolCalls != 1 || c.Ending != want {
					t.Errorf("case %d %s@%s: the tool ran %d times, ending %q; want once, %q", c.N, c.Action, c.Row(), c.ToolCalls, c.Ending, want)
				}
			}
			want := 0
			for _, p := range points[:len(points)-1] {
				for _, a := range actions {
					want++
					if ran[a+"@"+p] != 1 {
						t.Errorf("%s@%s ran %d times", a, p, ran[a+"@"+p])
					}
				}
			}
			for _, row := range toolRows {
				for _, a := range toolActions {
					want++
					if ran[a+"@"+row] != 1 {
						t.Errorf("%s@%s ran %d times", a, row, ran[a+"@"+row])
					}
				}
			}
			if len(rep.Cases) != want {
				t.Errorf("%d cases, want %d", len(rep.Cases), want)
			}
			if t.Failed() {
				t.Logf("%s\n%s%s", progress.String(), rep.Table(), rep.Summary())
			}
		})
	}
}

// A foreign target that never answers is reported as such, not swept.
func TestSweepTargetNotReady(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := RunSweep(context.Background(), SweepConfig{Target: srv.URL, Tokens: 1, ReadyTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not answer a plain request") || !strings.Contains(err.Error(), "status 503") {
		t.Fatalf("err = %v", err)
	}
}

// Bad flags say what is wrong.
func TestChaosFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tokens", "4"}, "--tokens needs --exhaustive or --target"},
		{[]string{"--exhaustive", "--actions", "crash,explode"}, `unknown action "explode"`},
		{[]string{"--exhaustive", "--tokens", "2", "--points", "sent:3"}, `unknown point "sent:3"`},
		{[]string{"--exhaustive", "--points", "tool:2"}, `unknown point "tool:2"`},
		{[]string{"--exhaustive", "--tool-actions", "crash,stall"}, `unknown action "stall" at tool:1`},
		{[]string{"--tool-actions", "crash"}, "--tool-actions needs --exhaustive or --target"},
		{[]string{"--exhaustive", "--api", "messages"}, `API "messages"`},
		{[]string{"--exhaustive", "--target-cmd", "true"}, "need --target"},
		{[]string{"--exhaustive", "extra"}, "unexpected arguments"},
		{[]string{"--exhaustive", "--replicas", "11"}, "at most 10 replicas"},
		{[]string{"--exhaustive", "--tokens", "0"}, "at least 1 token"},
		{[]string{"--target", "127.0.0.1:8080"}, "want a base URL"},
		{[]string{"--target", "http://127.0.0.1:1", "--config-out", "x.conf"}, "--config-out needs --config-template"},
		{[]string{"--exhaustive", "--tokens", "x"}, `invalid value "x" for flag -tokens`},
	} {
		var out bytes.Buffer
		err := Main(tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	var help bytes.Buffer
	if err := Main([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	for _, want := range []string{"fencegate chaos --exhaustive", "fencegate chaos --target URL", "-config-template", "docs/chaos.md"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help does not mention %q:\n%s", want, help.String())
		}
	}
}
