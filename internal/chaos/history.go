package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// request is one logical request of the plan and what its client saw.
type request struct {
	n         int
	prompt    string
	maxTokens int
	fault     string // X-Sim-Fault, "" for none
	seen      seen
}

// seen is the client's side of one request's history.
type seen struct {
	status    int
	requestID string
	body      string   // the body of a non-200 answer
	events    []string // the data of every SSE event, in order
	err       error    // a transport error: the gateway must never cut a stream
}

func (r *request) body() string {
	p, _ := json.Marshal(r.prompt)
	return fmt.Sprintf(`{"model":"sim-model","stream":%%s,"max_tokens":%d,"temperature":0,"seed":7,"ignore_eos":true,"messages":[{"role":"user","content":%s}]}`,
		r.maxTokens, p)
}

// send runs one request through the gateway and records what its client saw.
func send(ctx context.Context, client *http.Client, gateway string, r *request) seen {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(r.body(), "true")))
	if err != nil {
		return seen{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if r.fault != "" {
		req.Header.Set("X-Sim-Fault", r.fault)
	}
	resp, err := client.Do(req)
	if err != nil {
		return seen{err: err}
	}
	defer resp.Body.Close()
	s := seen{status: resp.StatusCode, requestID: resp.Header.Get("X-Request-Id")}
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(resp.Body)
		s.body, s.err = string(b), err
		return s
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			s.events = append(s.events, string(d))
		}
	}
	s.err = sc.Err()
	return s
}

// chunk is what the checker reads of an SSE event.
type chunk struct {
	Choices []struct {
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Code                  string `json:"code"`
		Message               string `json:"message"`
		RequestID             string `json:"request_id"`
		PartialOutput         *bool  `json:"partial_output"`
		DeliveredOutputTokens *int   `json:"delivered_output_tokens"`
		Retryable             *bool  `json:"retryable"`
	} `json:"error"`
}

// journal is what GET /v1/requests/{id} says.
type journal struct {
	Phase                 string `json:"phase"`
	Outcome               string `json:"outcome"`
	FirstDeltaSent        bool   `json:"first_delta_sent"`
	DeliveredOutputTokens int    `json:"delivered_output_tokens"`
	Attempts              []struct {
		ID      string `json:"id"`
		Replica string `json:"replica"`
	} `json:"attempts"`
}
