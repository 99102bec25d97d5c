package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// withRID sets "rid" in a JSON request body to the attempt id, so SGLang
// names the request by it and /abort_request can find it. The rest of the
// body is left byte for byte as it was.
func withRID(body []byte, attempt string) ([]byte, error) {
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		return nil, fmt.Errorf("the request body is not a JSON object")
	}
	out, err := sjson.SetBytes(body, "rid", attempt)
	if err != nil {
		return nil, fmt.Errorf("setting rid in the request body: %w", err)
	}
	return out, nil
}

// abortSGLang asks SGLang to abort the request named attempt. Closing the
// connection already stops the stream; SGLang also frees the request's slot
// and KV cache at once when told explicitly. Failure is logged, not fatal:
// the connection is closed either way.
func (a *Agent) abortSGLang(attempt string) {
	ctx, cancel := context.WithTimeout(context.Background(), abortRequestTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"rid": attempt}) // a map of strings always marshals
	target := a.engineURLFor(&url.URL{Path: "/abort_request"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		a.log.Warn("building the SGLang abort request", "attempt", attempt, "err", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		a.metrics.sglangAborts.WithLabelValues("failed").Inc()
		a.log.Warn("SGLang abort_request failed", "attempt", attempt, "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		a.metrics.sglangAborts.WithLabelValues("failed").Inc()
		a.log.Warn("SGLang abort_request refused", "attempt", attempt, "status", resp.StatusCode)
		return
	}
	a.metrics.sglangAborts.WithLabelValues("ok").Inc()
}
