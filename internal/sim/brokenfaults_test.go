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
)

func TestParseNewFaults(t *testing.T) {
	plan, err := parseFaultSpec("error@sent:2,error:nodone@computed:1;on=a,garbage@sent:0,oversize@prefill,drop@accept,drop@sent:3")
	if err != nil {
		t.Fatal(err)
	}
	want := []fault{
		{action: actionError, point: pointSent, token: 2},
		{action: actionError, noDone: true, point: pointComputed, token: 1, on: "a"},
		{action: actionGarbage, point: pointSent},
		{action: actionOversize, point: pointPrefill},
		{action: actionDrop, point: pointAccept},
		{action: actionDrop, point: pointSent, token: 3},
	}
	for i, f := range plan {
		f.text = ""
		if f != want[i] {
			t.Errorf("fault %d = %+v, want %+v", i, f, want[i])
		}
	}
	for _, bad := range []string{"error:500@sent:1", "error:done@accept", "garbage:x@accept", "drop", "oversize@"} {
		if _, err := parseFaultSpec(bad); err == nil {
			t.Errorf("parseFaultSpec(%q) succeeded", bad)
		}
	}
}

// vllmStreamError is vLLM's mid-stream GenerationError event, byte for
// byte (testdata/vllm_chat_stream_error.sse).
const vllmStreamError = `{"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}}`

func TestFaultErrorLikeVLLM(t *testing.T) {
	for _, p := range faultPoints {
		for _, action := range []string{"error", "error:nodone"} {
			t.Run(action+"@"+p.spec, func(t *testing.T) {
				s := startSim(t, Config{})
				o := observe(testContext(t), newClient(t), faultRequest(t, s, action+"@"+p.spec), nil)
				if o.err != nil {
					t.Fatalf("client error: %v", o.err)
				}
				if !p.headers {
					if o.status != http.StatusInternalServerError {
						t.Fatalf("status %d, want 500", o.status)
					}
					e := decodeError(t, o.body)
					if e.Error.Message != "Internal server error" || e.Error.Type != "InternalServerError" || e.Error.Code != 500 || e.Error.Param != nil {
						t.Errorf("error body %s", o.body)
					}
				} else {
					wantEvents := p.events + 2 // the error event, then [DONE]
					if action == "error:nodone" {
						wantEvents--
					}
					if o.status != http.StatusOK || len(o.events) != wantEvents {
						t.Fatalf("status %d, events %q, want %d events", o.status, o.events, wantEvents)
					}
					if got := o.events[p.events]; got != vllmStreamError {
						t.Errorf("error event\n got %s\nwant %s", got, vllmStreamError)
					}
					if action == "error" && o.events[len(o.events)-1] != "[DONE]" {
						t.Errorf("no [DONE] after the error: %q", o.events)
					}
				}
				if rec := s.Records()[0]; rec.Outcome != OutcomeError || rec.TokensComputed != p.computed || rec.TokensSent != p.sent {
					t.Errorf("record = %+v", rec)
				}
			})
		}
	}
}

func TestFaultErrorMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	req := newPost(t, testContext(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", map[string]any{"stream": true, "max_tokens": 5})), map[string]string{"X-Sim-Fault": "error@sent:0"})
	o := observe(testContext(t), newClient(t), req, nil)
	compareStream(t, "vllm_chat_stream_error.sse", o.events)
}

// The status fault shares the error event's rendering and keeps its own
// [DONE] switch.
func TestFaultStatusEventRendering(t *testing.T) {
	s := startSim(t, Config{DoneAfterStreamError: true})
	o := observe(testContext(t), newClient(t), faultRequest(t, s, "status:503@sent:0"), nil)
	want := `{"error": {"message": "simulated engine error 503 (fault status:503@sent:0)", "type": "ServiceUnavailableError", "param": null, "code": 503}}`
	if len(o.events) != 4 || o.events[2] != want || o.events[3] != "[DONE]" {
		t.Errorf("events %q", o.events)
	}
}

func TestPythonJSONStrings(t *testing.T) {
	// What Python's json.dumps writes for each string.
	cases := map[string]string{
		`plain`:                       `"plain"`,
		"quote \" back \\ slash /":    `"quote \" back \\ slash /"`,
		"ctl \b\f\n\r\t\x01\x1f\x7f":  `"ctl \b\f\n\r\t\u0001\u001f` + "\x7f" + `"`,
		"caf\u00e9 \u2603 \U0001f600": `"caf\u00e9 \u2603 \ud83d\ude00"`,
		"<&>":                         `"<&>"`,
	}
	for in, want := range cases {
		if got := string(appendPyString(nil, in)); got != want {
			t.Errorf("appendPyString(%q) = %s, want %s", in, got, want)
		}
	}
	var back struct {
		Error struct {
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	body := streamErrorJSON(apiError{status: 400, message: "bad \"x\" é", param: "p"})
	if err := json.Unmarshal(body, &back); err != nil || back.Error.Message != "bad \"x\" é" || back.Error.Param != "p" {
		t.Errorf("%s does not decode back: %v", body, err)
	}
}

// cancelAndCollect makes a client that still waits for more of a silent
// stream give up, and returns what it observed.
func cancelAndCollect(cancel context.CancelFunc, done <-chan observation) observation {
	cancel()
	return <-done
}

func TestFaultGarbageStream(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		s := startSim(t, Config{})
		body := map[string]any{"model": "sim-model", "stream": true, "max_tokens": 6, "messages": []map[string]any{{"role": "user", "content": "x"}}, "prompt": "x"}
		ctx, cancel := contextWithCancel(t)
		progress := make(chan int, 100)
		done := make(chan observation, 1)
		req := newPost(t, ctx, s.URL()+path, jsonBody(t, body), map[string]string{"X-Sim-Fault": "garbage@sent:1"})
		go func() { done <- observe(ctx, newClient(t), req, progress) }()
		events := 4 // role, two tokens, the garbage
		if path == "/v1/completions" {
			events = 3 // no role chunk
		}
		waitProgress(t, progress, events)
		// The connection stays open: the record has not ended.
		if rec := s.Records()[0]; rec.Outcome != "" || rec.TokensSent != 2 {
			t.Fatalf("%s: record while silent = %+v", path, rec)
		}
		o := cancelAndCollect(cancel, done)
		if !errors.Is(o.err, context.Canceled) {
			t.Errorf("%s: client error %v, want its own cancel (no end of stream)", path, o.err)
		}
		last := o.events[len(o.events)-1]
		if json.Valid([]byte(last)) || !strings.HasPrefix(last, `{"id":"`) {
			t.Errorf("%s: last event %q is not a cut-short chunk", path, last)
		}
		if rec := waitRecord(t, s, ended); rec.Outcome != OutcomeGarbage {
			t.Errorf("%s: record = %+v", path, rec)
		}
	}
}

func TestFaultGarbageWhole(t *testing.T) {
	s := startSim(t, Config{})
	ctx, cancel := contextWithCancel(t)
	req := newPost(t, ctx, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", nil)), map[string]string{"X-Sim-Fault": "garbage@computed:2"})
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	var got []byte
	for !bytes.HasSuffix(got, []byte(`"content":"`)) {
		b, err := br.ReadByte()
		if err != nil {
			t.Fatalf("body ended after %q: %v", got, err)
		}
		got = append(got, b)
	}
	if json.Valid(got) || !bytes.HasPrefix(got, []byte(`{"id":"chatcmpl-`)) {
		t.Errorf("body %s", got)
	}
	cancel()
	if rec := waitRecord(t, s, ended); rec.Outcome != OutcomeGarbage || rec.TokensComputed != 3 {
		t.Errorf("record = %+v", rec)
	}
}

func TestFaultOversize(t *testing.T) {
	s := startSim(t, Config{})
	ctx, cancel := contextWithCancel(t)
	progress := make(chan int, 100)
	done := make(chan observation, 1)
	req := newPost(t, ctx, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", map[string]any{"stream": true, "max_tokens": 6})), map[string]string{"X-Sim-Fault": "oversize@sent:0"})
	go func() { done <- observe(ctx, newClient(t), req, progress) }()
	waitProgress(t, progress, 3) // role, token 0, the big event
	if rec := s.Records()[0]; rec.Outcome != "" {
		t.Fatalf("record while silent = %+v", rec)
	}
	o := cancelAndCollect(cancel, done)
	big := o.events[2]
	if len(big) <= 4<<20 || !json.Valid([]byte(big)) {
		t.Errorf("event of %d bytes (valid JSON %v), want a valid chunk over 4 MiB", len(big), json.Valid([]byte(big)))
	}
	if len(o.events) != 3 {
		t.Errorf("%d events, want nothing after the big one", len(o.events))
	}
	if rec := waitRecord(t, s, ended); rec.Outcome != OutcomeOversize || rec.TokensSent != 1 {
		t.Errorf("record = %+v", rec)
	}
}

// A client that gives up reading mid-way (as a gateway with a line limit
// does) ends the record as oversize, not cancelled.
func TestFaultOversizeClientLeaves(t *testing.T) {
	s := startSim(t, Config{})
	ctx, cancel := contextWithCancel(t)
	req := newPost(t, ctx, s.URL()+"/v1/completions", jsonBody(t, map[string]any{"model": "sim-model", "prompt": "x"}), map[string]string{"X-Sim-Fault": "oversize@accept"})
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	if rec := waitRecord(t, s, ended); rec.Outcome != OutcomeOversize {
		t.Errorf("record = %+v", rec)
	}
}

func TestFaultDropAtAccept(t *testing.T) {
	s := startSim(t, Config{})
	_, err := newClient(t).Do(faultRequest(t, s, "drop@accept"))
	if err == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("client error %v, want the connection closed (EOF) before any response", err)
	}
	rec := s.Records()[0]
	if rec.Outcome != OutcomeDropped || rec.Fault != "drop@accept" || rec.PromptTokens == 0 || rec.Endpoint != "chat" {
		t.Errorf("record = %+v, want the request seen in full and dropped", rec)
	}
	// Only that connection closed: the replica still serves.
	if o := observe(testContext(t), newClient(t), faultRequest(t, s, ""), nil); o.err != nil || len(o.events) != 9 {
		t.Errorf("after the drop: %d events, err %v", len(o.events), o.err)
	}
}

func TestFaultDropMidStream(t *testing.T) {
	s := startSim(t, Config{})
	o := observe(testContext(t), newClient(t), faultRequest(t, s, "drop@sent:1"), nil)
	if !errors.Is(o.err, io.ErrUnexpectedEOF) || len(o.events) != 3 {
		t.Errorf("client saw %d events and %v, want 3 and an unexpected end of the body", len(o.events), o.err)
	}
	if rec := s.Records()[0]; rec.Outcome != OutcomeDropped || rec.TokensSent != 2 {
		t.Errorf("record = %+v", rec)
	}
}

// TestFaultDropOnKeptAliveConnection shows what the drop fault is for: a
// request on a reused connection that the engine reads and then drops.
// Go's transport resends such a request by itself only when it counts as
// replayable (here: an Idempotency-Key header), and the records show every
// copy the engine saw.
func TestFaultDropOnKeptAliveConnection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header map[string]string
		copies int
	}{
		{"plain POST", map[string]string{"X-Sim-Fault": "drop@accept"}, 1},
		{"replayable POST", map[string]string{"X-Sim-Fault": "drop@accept", "Idempotency-Key": "k1"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSim(t, Config{})
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			t.Cleanup(tr.CloseIdleConnections)
			c := &http.Client{Transport: tr}
			body := jsonBody(t, chatRequest("keep-alive", map[string]any{"max_tokens": 1}))
			if status, _ := postJSON(t, c, s.URL()+"/v1/chat/completions", body, nil); status != 200 {
				t.Fatalf("first request: %d", status)
			}
			if _, err := c.Do(newPost(t, testContext(t), s.URL()+"/v1/chat/completions", body, tc.header)); err == nil {
				t.Fatal("the dropped request got a response")
			}
			recs := s.Records()
			if len(recs) != 1+tc.copies {
				t.Fatalf("the engine saw %d requests, want 1 + %d: %+v", len(recs), tc.copies, recs)
			}
			for _, r := range recs[1:] {
				if r.Outcome != OutcomeDropped {
					t.Errorf("record = %+v", r)
				}
			}
		})
	}
}

func TestFaultHelpInCLI(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--stream-interval", "-max-model-len", "error:nodone", "garbage", "oversize", "drop", "computed:K"} {
		if !strings.Contains(out.String(), strings.TrimPrefix(want, "-")) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
