package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// setReplica declares a replica's state through the admin endpoint.
func (e *env) setReplica(name, state string) {
	e.t.Helper()
	resp, err := http.Post(e.admin.URL+"/admin/replicas/sim-model/"+name, "application/json", strings.NewReader(`{"state":"`+state+`"}`))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("admin %s %s: %d", name, state, resp.StatusCode)
	}
}

// A Responses request that continues a stored response (previous_response_id) runs on the
// replica that stored it, even when another would be chosen; when that replica is gone the
// client is told so, and the request never runs elsewhere, where the state does not exist.
func TestPreviousResponsePinnedToItsReplica(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.EnableResponsesStore = true }})
	// The first response is made on sim-2.
	e.setReplica("sim-1", "draining")
	var resp *http.Response
	first, err := e.client.Responses.New(testCtx(t), responses.ResponseNewParams{Model: "sim-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("remember the word blue")}, MaxOutputTokens: openai.Int(4)},
		option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if rec := e.record(resp.Header.Get("X-Request-Id")); rec.Attempts[0].Replica != "sim-2" {
		t.Fatalf("first response on %s", rec.Attempts[0].Replica)
	}
	e.setReplica("sim-1", "active")

	// The continuation goes to sim-2, though sim-1 is back and first in line.
	next := responses.ResponseNewParams{Model: "sim-model", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("which word?")}, MaxOutputTokens: openai.Int(4)}
	s := e.client.Responses.NewStreaming(testCtx(t), next, option.WithResponseInto(&resp))
	for s.Next() {
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	rec := e.record(resp.Header.Get("X-Request-Id"))
	if len(rec.Attempts) != 1 || rec.Attempts[0].Replica != "sim-2" || rec.Outcome != "completed" {
		t.Fatalf("continuation journal %+v", rec)
	}

	// Its replica gone: a clear error, and no other replica is asked.
	e.setReplica("sim-2", "dead")
	before := len(e.sims[0].Records())
	_, err = e.client.Responses.New(testCtx(t), next)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "previous_response_unavailable" || apiErr.StatusCode != 503 {
		t.Fatalf("got %v", err)
	}
	var body struct {
		Error struct {
			Retryable bool `json:"retryable"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(apiErr.RawJSON()), &body)
	if body.Error.Retryable {
		t.Fatal("a request whose state is gone is not safe to retry as it is")
	}
	if after := len(e.sims[0].Records()); after != before {
		t.Fatal("the continuation ran on a replica without its state")
	}
}

// One API key cannot continue another's conversation: the previous response of another
// key is answered as unknown, in the Responses error shape, and reaches no replica.
func TestPreviousResponseOfAnotherKey(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.EnableResponsesStore = true }, config: func(c *config.Config) {
		c.Auth = config.Auth{Keys: []config.APIKey{{ID: "team-a", Key: keyA}, {ID: "team-b", Key: keyB}}}
	}})
	r := authed(t, "POST", e.srv.URL+"/v1/responses", keyA, `{"model":"sim-model","input":"a secret","max_output_tokens":3}`)
	var first struct {
		ID string `json:"id"`
	}
	json.NewDecoder(r.Body).Decode(&first)
	if r.StatusCode != 200 || first.ID == "" {
		t.Fatalf("first response %d", r.StatusCode)
	}
	before := e.totalSimRequests()
	other := authed(t, "POST", e.srv.URL+"/v1/responses", keyB, `{"model":"sim-model","input":"tell me","previous_response_id":"`+first.ID+`"}`)
	var body struct {
		Error struct {
			Code  string `json:"code"`
			Param string `json:"param"`
		} `json:"error"`
	}
	json.NewDecoder(other.Body).Decode(&body)
	if other.StatusCode != 404 || body.Error.Code != "previous_response_not_found" || body.Error.Param != "previous_response_id" {
		t.Fatalf("another key: %d %+v", other.StatusCode, body)
	}
	if e.totalSimRequests() != before {
		t.Fatal("another key's continuation reached a replica")
	}
}
