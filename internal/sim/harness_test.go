package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind, but one: a closed ZMQ PUB
// socket's writer (zmq4 v0.17.0) waits forever when the close signalled it while it was
// sending rather than waiting, an idle goroutine of the library the sim cannot end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}

// testTimeout bounds every wait in a test; it is a safety net against a
// hung test, never a pacing device.
const testTimeout = 20 * time.Second

// startSim starts a replica that is closed when the test ends.
func startSim(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newClient returns a client that opens a fresh connection per request, so
// that a crash or reset of one request's connection never leaks into the
// next request through the idle pool.
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// jsonBody marshals v for a request body.
func jsonBody(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// chatRequest is a chat completion body for the default model.
func chatRequest(content string, extra map[string]any) map[string]any {
	req := map[string]any{
		"model":    "sim-model",
		"messages": []map[string]any{{"role": "user", "content": content}},
	}
	for k, v := range extra {
		req[k] = v
	}
	return req
}

func newPost(t testing.TB, ctx context.Context, url string, body []byte, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}

// postJSON sends body and returns the status and the whole response body.
func postJSON(t testing.TB, c *http.Client, url string, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	resp, err := c.Do(newPost(t, testContext(t), url, body, header))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp.StatusCode, b
}

func getBody(t testing.TB, c *http.Client, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp.StatusCode, b
}

// eventReader splits an SSE body into the payloads of its data lines.
type eventReader struct{ br *bufio.Reader }

func (e *eventReader) next() (string, error) {
	var data []string
	for {
		line, err := e.br.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if data != nil {
				return strings.Join(data, "\n"), nil
			}
			continue
		}
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return "", errors.New("unexpected SSE line " + line)
		}
		data = append(data, payload)
	}
}

// observation is everything a client saw of one streamed request.
type observation struct {
	status int
	header http.Header
	body   []byte   // the whole body when status is not 200
	events []string // SSE data payloads in order
	err    error    // from Do or from reading the body; nil on a clean end
}

// observe runs one request and reads its SSE events until the body ends.
// When progress is not nil it receives the number of events seen after
// the headers arrive and after every event, so a test can act at a point.
func observe(ctx context.Context, c *http.Client, req *http.Request, progress chan<- int) observation {
	var o observation
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		o.err = err
		return o
	}
	defer resp.Body.Close()
	o.status, o.header = resp.StatusCode, resp.Header
	if resp.StatusCode != http.StatusOK {
		o.body, o.err = io.ReadAll(resp.Body)
		return o
	}
	if progress != nil {
		progress <- 0
	}
	er := &eventReader{br: bufio.NewReader(resp.Body)}
	for {
		ev, err := er.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				o.err = err
			}
			return o
		}
		o.events = append(o.events, ev)
		if progress != nil {
			progress <- len(o.events)
		}
	}
}

// decodeEvent decodes one SSE payload as a JSON object.
func decodeEvent(t testing.TB, ev string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev), &m); err != nil {
		t.Fatalf("event %q is not JSON: %v", ev, err)
	}
	return m
}

// waitRecord waits for a record matching fn, failing the test on timeout.
func waitRecord(t testing.TB, s *Server, fn func(Record) bool) Record {
	t.Helper()
	rec, err := s.WaitRecord(testContext(t), fn)
	if err != nil {
		t.Fatalf("WaitRecord: %v (records: %+v)", err, s.Records())
	}
	return rec
}

func ended(r Record) bool { return r.Outcome != "" }

// waitProgress waits until the observer has seen at least n events.
func waitProgress(t testing.TB, progress <-chan int, n int) {
	t.Helper()
	timeout := time.NewTimer(testTimeout)
	defer timeout.Stop()
	for {
		select {
		case got := <-progress:
			if got >= n {
				return
			}
		case <-timeout.C:
			t.Fatalf("client did not see %d events", n)
		}
	}
}

// errorBody decodes vLLM's current error shape.
type errorBody struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	} `json:"error"`
}

func decodeError(t testing.TB, b []byte) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Fatalf("not a vLLM error body: %s (%v)", b, err)
	}
	return e
}

// contextWithCancel is a test context the test may also cancel itself.
func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithCancel(testContext(t))
}
