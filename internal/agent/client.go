package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/secretfile"
)

// SetLeaseHeaders adds the lease headers of a fenced data request to h.
func SetLeaseHeaders(h http.Header, attempt string, epoch uint64, ttl time.Duration, gateway string) {
	h.Set(HeaderAttempt, attempt)
	h.Set(HeaderLease, lease.FormatHeader(epoch, ttl))
	if gateway != "" {
		h.Set(HeaderGateway, gateway)
	}
}

// Client calls an agent's control endpoints. The zero HTTP uses
// http.DefaultClient; callers should pass one with a timeout suited to the
// call (a renewal that takes longer than the renewal interval is as good as
// lost).
type Client struct {
	BaseURL string // the agent's base URL, e.g. "http://10.0.0.5:8101"
	// Secret's current secret is sent as X-Fencegate-Agent-Key (nil: none); it is read at
	// each call, so a rotation takes effect without a new Client.
	Secret *secretfile.File
	HTTP   *http.Client
}

// Renew sends one batched renewal.
func (c *Client) Renew(ctx context.Context, req RenewRequest) (RenewReply, error) {
	var reply RenewReply
	err := c.call(ctx, http.MethodPost, PathRenew, req, &reply)
	return reply, err
}

// Cancel revokes attempt's lease at epoch and waits for the agent's ack, which
// comes once the engine request has ended.
func (c *Client) Cancel(ctx context.Context, attempt string, epoch uint64) (CancelReply, error) {
	var reply CancelReply
	err := c.call(ctx, http.MethodPost, PathCancel, CancelRequest{Attempt: attempt, Epoch: epoch}, &reply)
	return reply, err
}

// Attempts lists the agent's live attempts.
func (c *Client) Attempts(ctx context.Context) ([]AttemptInfo, error) {
	var list AttemptList
	err := c.call(ctx, http.MethodGet, PathAttempts, nil, &list)
	return list.Attempts, err
}

// call performs one control call. A non-200 reply is returned as an
// *openai.Error carrying the status.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("agent client: encoding %s: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("agent client: %s: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if k := c.Secret.Current(); k != "" {
		req.Header.Set(HeaderAgentKey, k)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("agent client: %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxControlBody))
	if err != nil {
		return fmt.Errorf("agent client: reading the reply to %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &openai.Error{Status: resp.StatusCode}
		if jerr := json.Unmarshal(data, e); jerr != nil {
			e.Message = fmt.Sprintf("agent answered %s with status %d", path, resp.StatusCode)
		}
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("agent client: decoding the reply to %s: %w", path, err)
	}
	return nil
}
