package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// storeEnv is two replicas that store their responses, sim-1 serving first (a lower tier).
func storeEnv(t *testing.T) *env {
	return newEnv(t, envOptions{sim: func(_ int, c *sim.Config) { c.EnableResponsesStore = true },
		config: func(c *config.Config) { c.Models[0].Replicas[1].Priority = 1 }})
}

// A streamed Responses request whose first attempt is reset after its response.created
// (held, then discarded) is rerun; the response the client receives is the rerun's, and the
// journal pins that one to its replica: a continuation runs there, not on the first replica,
// which never stored it.
func TestResponsesRerunPinsTheDeliveredResponse(t *testing.T) {
	e := storeEnv(t)
	var resp *http.Response
	s := e.client.Responses.NewStreaming(testCtx(t), responses.ResponseNewParams{Model: "sim-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("remember the word green")}, MaxOutputTokens: openai.Int(4)},
		option.WithHeader("X-Sim-Fault", "reset@prefill;on=sim-1"), option.WithResponseInto(&resp))
	var created, completed string
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.created":
			created = ev.Response.ID
		case "response.completed":
			completed = ev.Response.ID
		}
	}
	s.Close()
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	rec := e.record(resp.Header.Get("X-Request-Id"))
	if rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[1].Replica != "sim-2" {
		t.Fatalf("journal %+v", rec)
	}
	if created == "" || created != completed {
		t.Fatalf("response.created named %q, response.completed %q", created, completed)
	}

	before := len(e.sims[0].Records())
	next, err := e.client.Responses.New(testCtx(t), responses.ResponseNewParams{Model: "sim-model",
		PreviousResponseID: openai.String(completed),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("which word?")}, MaxOutputTokens: openai.Int(4)},
		option.WithResponseInto(&resp))
	if err != nil {
		t.Fatalf("continuing %s: %v", completed, err)
	}
	if rec := e.record(resp.Header.Get("X-Request-Id")); rec.Outcome != "completed" || len(rec.Attempts) != 1 || rec.Attempts[0].Replica != "sim-2" || next.ID == "" {
		t.Fatalf("continuation journal %+v", rec)
	}
	if after := len(e.sims[0].Records()); after != before {
		t.Fatal("the continuation was sent to sim-1, which never stored the response it continues")
	}
}

// The same rerun, then interrupted after its first output: response.failed names the
// response the client's response.created named, not the discarded attempt's.
func TestResponsesRerunInterruptionNamesTheDeliveredResponse(t *testing.T) {
	e := storeEnv(t)
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, e.srv.URL+"/v1/responses",
		strings.NewReader(`{"model":"sim-model","input":"interrupt the rerun","max_output_tokens":8,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sim-Fault", "reset@prefill;on=sim-1,reset@sent:1;on=sim-2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	type response struct {
		ID        string `json:"id"`
		Model     string `json:"model"`
		CreatedAt int64  `json:"created_at"`
	}
	var created, failed *response
	var dec sse.Decoder
	dec.Append(body)
	for {
		ev, ok := dec.Next()
		if !ok {
			break
		}
		var d struct {
			Type     string   `json:"type"`
			Response response `json:"response"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		switch d.Type {
		case "response.created":
			if created != nil {
				t.Fatalf("two response.created events:\n%s", body)
			}
			created = &d.Response
		case "response.failed":
			failed = &d.Response
		}
	}
	if created == nil || failed == nil || !bytes.Contains(body, []byte("upstream_decode_interrupted")) {
		t.Fatalf("want response.created, an interruption and response.failed:\n%s", body)
	}
	if *failed != *created {
		t.Fatalf("response.failed names %+v, the client's response.created %+v", *failed, *created)
	}
	rec := e.record(resp.Header.Get("X-Request-Id"))
	if rec.Outcome != "interrupted" || len(rec.Attempts) != 2 || rec.Attempts[1].Replica != "sim-2" {
		t.Fatalf("journal %+v", rec)
	}
}
