package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/upstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// env is a gateway in front of simulated replicas, all on loopback, and the official
// OpenAI Go client pointed at the gateway.
type env struct {
	t    testing.TB
	sims []*sim.Server
	gw   *gateway.Server
	srv  *httptest.Server
	// admin serves the admin listener: admin_listen on loopback unless the test's config
	// clears it (then srv serves the operator's endpoints too, behind an admin key).
	admin *httptest.Server
	// oneListener: the test's config cleared admin_listen.
	oneListener bool
	client      openai.Client
}

// operatorURL is where the gateway serves the operator's endpoints: the admin listener,
// or the one listener when there is no admin listener.
func (e *env) operatorURL() string {
	if e.oneListener {
		return e.srv.URL
	}
	return e.admin.URL
}

type envOptions struct {
	replicas int
	sim      func(i int, c *sim.Config)
	config   func(c *config.Config)
	store    store.Store // default: the config's store (memory:)
	// sims, when set, are the replicas to use (shared with another gateway).
	sims []*sim.Server
	now  func() time.Time
	// dial, when set, replaces the gateway's dialer to replicas and agents.
	dial upstream.DialFunc
	// storeRetry says how a store not reachable at start is tried again.
	storeRetry store.DeferredOptions
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 2
	}
	e := &env{t: t}
	var reps []config.Replica
	for i, s := range o.sims {
		e.sims = append(e.sims, s)
		reps = append(reps, config.Replica{Name: fmt.Sprintf("sim-%d", i+1), URL: s.URL()})
	}
	for i := 0; i < o.replicas && o.sims == nil; i++ {
		sc := sim.Config{Name: fmt.Sprintf("sim-%d", i+1), Model: "sim-model"}
		if o.sim != nil {
			o.sim(i, &sc)
		}
		s, err := sim.Start(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		e.sims = append(e.sims, s)
		reps = append(reps, config.Replica{Name: sc.Name, URL: s.URL()})
	}
	cfg := &config.Config{Models: []config.Model{{Name: "sim-model", Replicas: reps}}, Store: "memory:", AdminListen: "127.0.0.1:0"}
	if o.config != nil {
		o.config(cfg)
	}
	if o.store != nil {
		cfg.Store = "memory:" // unused: the given store is
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e.oneListener = cfg.AdminListen == ""
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{Store: o.store, Now: o.now, Dial: o.dial, StoreRetry: o.storeRetry})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	e.gw = gw
	e.srv = h1servertest.NewServer(gw.Handler())
	e.admin = h1servertest.NewServer(gw.AdminHandler())
	t.Cleanup(func() {
		e.srv.Close()
		e.admin.Close()
		gw.Close()
	})
	e.client = openai.NewClient(option.WithBaseURL(e.srv.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	return e
}

func chatParams(prompt string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       "sim-model",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
	}
}

// streamResult is what a client saw of one streamed chat completion.
type streamResult struct {
	requestID string
	content   string
	chunks    int
	finish    string
	err       error
}

func (e *env) stream(ctx context.Context, p openai.ChatCompletionNewParams, opts ...option.RequestOption) streamResult {
	var resp *http.Response
	opts = append(opts, option.WithResponseInto(&resp))
	s := e.client.Chat.Completions.NewStreaming(ctx, p, opts...)
	defer s.Close()
	var r streamResult
	for s.Next() {
		c := s.Current()
		r.chunks++
		for _, ch := range c.Choices {
			r.content += ch.Delta.Content
			if ch.FinishReason != "" {
				r.finish = ch.FinishReason
			}
		}
	}
	r.err = s.Err()
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

// direct asks replica i for the same completion, bypassing the gateway: the reference
// answer a rerun on that replica must match exactly.
func (e *env) direct(i int, p openai.ChatCompletionNewParams) string {
	e.t.Helper()
	c := openai.NewClient(option.WithBaseURL(e.sims[i].URL()+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	resp, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		e.t.Fatalf("direct request to %s: %v", e.sims[i].Name(), err)
	}
	return resp.Choices[0].Message.Content
}

// requestRecord mirrors GET /v1/requests/{id}.
type requestRecord struct {
	ID                    string          `json:"id"`
	Phase                 string          `json:"phase"`
	Outcome               string          `json:"outcome"`
	FirstDeltaSent        bool            `json:"first_delta_sent"`
	FirstDeltaAt          time.Time       `json:"first_delta_at"`
	DeliveredOutputTokens int             `json:"delivered_output_tokens"`
	Error                 json.RawMessage `json:"error"`
	Attempts              []struct {
		ID         string    `json:"id"`
		N          int       `json:"n"`
		Replica    string    `json:"replica"`
		StartedAt  time.Time `json:"started_at"`
		EndReason  string    `json:"end_reason"`
		Failure    string    `json:"failure"`
		CancelSent bool      `json:"cancel_sent"`
		// EngineMayHaveActed: a tool the engine runs itself may have run.
		EngineMayHaveActed bool `json:"engine_may_have_acted"`
	} `json:"attempts"`
}

// record reads the journal entry of id once the request is done (long poll).
func (e *env) record(id string) requestRecord {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + "/v1/requests/" + id + "?wait=20s")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET /v1/requests/%s: %d %s", id, resp.StatusCode, b)
	}
	var r requestRecord
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatal(err)
	}
	if r.Phase != "done" {
		e.t.Fatalf("request %s still %s after waiting", id, r.Phase)
	}
	return r
}

// simRequests returns the records of replica i that belong to gateway request id.
func (e *env) simRequests(i int, id string) []sim.Record {
	var out []sim.Record
	for _, r := range e.sims[i].Records() {
		if r.RequestID == id {
			out = append(out, r)
		}
	}
	return out
}

func (e *env) totalSimRequests() int {
	n := 0
	for _, s := range e.sims {
		n += len(s.Records())
	}
	return n
}

// armAll arms fault on every replica for its next request, so a test does not depend on
// which replica the balancer picks first.
func (e *env) armAll(fault string) {
	e.t.Helper()
	for _, s := range e.sims {
		if err := s.ArmFault(fault, 1); err != nil {
			e.t.Fatal(err)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// metrics returns the gateway's Prometheus exposition.
func (e *env) metrics() string {
	e.t.Helper()
	return getText(e.t, e.admin.URL+"/metrics")
}

// getText returns the body of GET url.
func getText(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
