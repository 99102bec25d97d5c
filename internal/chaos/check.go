package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/sim"
)

// checker compares each request's history with the contract.
type checker struct {
	gateway string
	sims    []*sim.Server
	agents  map[string]*agent.Agent // fenced mode: each replica's agent
	client  *http.Client
	refs    map[string]string // replica + request → the replica's own answer
}

func (c *checker) check(ctx context.Context, plan []request) Report {
	rep := Report{Requests: len(plan), ByFault: map[string]int{}, FailCodes: map[string]int{}}
	for i := range plan {
		r := &plan[i]
		kind := "none"
		if r.fault != "" {
			kind = r.fault[:strings.IndexByte(r.fault, '@')]
		}
		rep.ByFault[kind]++
		outcome, violations := c.checkOne(ctx, r)
		violations = append(violations, c.checkAttempts(r)...)
		if code := errorCode(r.seen); code != "" {
			rep.FailCodes[code]++
		}
		for _, v := range violations {
			rep.Violations = append(rep.Violations, fmt.Sprintf("request %d (%s, fault %q): %s", r.n, r.seen.requestID, r.fault, v))
		}
		switch outcome {
		case "completed":
			rep.Completed++
		case "interrupted":
			rep.Interrupted++
		case "failed":
			rep.Failed++
		}
		if outcome == "rerun-completed" {
			rep.Completed++
			rep.Reruns++
		}
	}
	return rep
}

// checkOne checks one history and returns the outcome the client saw.
func (c *checker) checkOne(ctx context.Context, r *request) (string, []string) {
	s := r.seen
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if s.err != nil {
		fail("transport error: %v (the gateway must end every stream itself)", s.err)
		return "", bad
	}
	if !strings.HasPrefix(s.requestID, "req_") {
		fail("no X-Request-Id")
		return "", bad
	}
	j, err := c.journal(ctx, s.requestID)
	if err != nil {
		fail("journal: %v", err)
		return "", bad
	}
	if s.status != http.StatusOK {
		var env chunk
		if json.Unmarshal([]byte(s.body), &env) != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" {
			fail("status %d without an OpenAI error body: %q", s.status, s.body)
		}
		if j.Outcome != "failed" || j.FirstDeltaSent {
			fail("client got %d before any output, journal says %s (first_delta_sent %v)", s.status, j.Outcome, j.FirstDeltaSent)
		}
		return "failed", bad
	}

	content, pieces := "", 0
	var errEvent *chunk
	for i, d := range s.events {
		if errEvent != nil {
			fail("event after the final error event: %q", d)
			break
		}
		if d == "[DONE]" {
			if i != len(s.events)-1 {
				fail("[DONE] is not the last event")
			}
			continue
		}
		var ch chunk
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			fail("event is not JSON: %q", d)
			continue
		}
		if ch.Error != nil {
			errEvent = &ch
			continue
		}
		if i == 0 && (len(ch.Choices) == 0 || ch.Choices[0].Delta.Role != "assistant") {
			fail("the first event is not the role chunk: %q", d)
		}
		for _, choice := range ch.Choices {
			if choice.Delta.Content != nil && *choice.Delta.Content != "" {
				content += *choice.Delta.Content
				pieces++
			}
		}
	}
	if len(j.Attempts) == 0 {
		fail("journal has no attempt for a 200 answer")
		return "", bad
	}
	served := j.Attempts[len(j.Attempts)-1].Replica
	ref, err := c.reference(ctx, served, r)
	if err != nil {
		fail("reference answer of %s: %v", served, err)
		return "", bad
	}
	done := len(s.events) > 0 && s.events[len(s.events)-1] == "[DONE]"
	switch {
	case done && errEvent == nil:
		if content != ref {
			fail("completed with %q, but %s answers %q (spliced or repeated output)", content, served, ref)
		}
		if j.Outcome != "completed" {
			fail("client completed, journal says %s", j.Outcome)
		}
		if len(j.Attempts) > 1 {
			return "rerun-completed", bad
		}
		return "completed", bad
	case errEvent != nil && errEvent.Error.Code == "upstream_decode_interrupted":
		e := errEvent.Error
		if e.PartialOutput == nil || !*e.PartialOutput || e.Retryable == nil || *e.Retryable ||
			e.DeliveredOutputTokens == nil || *e.DeliveredOutputTokens != pieces || e.RequestID != s.requestID {
			fail("interruption event does not match what was delivered (%d pieces): %+v", pieces, *e)
		}
		if !strings.HasPrefix(ref, content) || pieces == 0 {
			fail("interrupted after %q, which is not a prefix of %s's answer %q", content, served, ref)
		}
		if j.Outcome != "interrupted" || !j.FirstDeltaSent || j.DeliveredOutputTokens != pieces {
			fail("client was interrupted after %d pieces, journal says %s/%v/%d", pieces, j.Outcome, j.FirstDeltaSent, j.DeliveredOutputTokens)
		}
		return "interrupted", bad
	case errEvent != nil:
		if pieces != 0 || errEvent.Error.PartialOutput == nil || *errEvent.Error.PartialOutput {
			fail("error event %q after %d pieces of output", errEvent.Error.Code, pieces)
		}
		if j.Outcome != "failed" {
			fail("client got an error before output, journal says %s", j.Outcome)
		}
		return "failed", bad
	}
	fail("the stream ended with neither [DONE] nor an error event after %d pieces (silent truncation)", pieces)
	return "", bad
}

func (c *checker) journal(ctx context.Context, id string) (journal, error) {
	var j journal
	resp, err := c.client.Get(c.gateway + "/v1/requests/" + id + "?wait=10s")
	if err != nil {
		return j, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return j, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return j, err
	}
	if j.Phase != "done" {
		return j, fmt.Errorf("still %s", j.Phase)
	}
	return j, nil
}

// reference asks a replica directly, without a fault, for its answer to r: with
// temperature 0 and a seed it is the only answer that replica ever gives.
func (c *checker) reference(ctx context.Context, replica string, r *request) (string, error) {
	key := replica + "\x00" + r.prompt + fmt.Sprint(r.maxTokens)
	if ref, ok := c.refs[key]; ok {
		return ref, nil
	}
	var url string
	for _, s := range c.sims {
		if s.Name() == replica {
			url = s.URL()
		}
	}
	if url == "" {
		return "", fmt.Errorf("no replica %s", replica)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(r.body(), "false")))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	c.refs[key] = out.Choices[0].Message.Content
	return c.refs[key], nil
}

// errorCode is the code of the error the client got, if any.
func errorCode(s seen) string {
	var ch chunk
	if s.status != http.StatusOK {
		if json.Unmarshal([]byte(s.body), &ch) == nil && ch.Error != nil {
			return ch.Error.Code
		}
		return fmt.Sprintf("status_%d", s.status)
	}
	if n := len(s.events); n > 0 && json.Unmarshal([]byte(s.events[n-1]), &ch) == nil && ch.Error != nil {
		return ch.Error.Code
	}
	return ""
}

// checkAttempts checks, from the replicas' own records, that no two attempts of one request
// were alive at once: each attempt's engine request ended before the next one started, and
// none is still running (a zombie).
func (c *checker) checkAttempts(r *request) []string {
	var recs []sim.Record
	for _, s := range c.sims {
		for _, rec := range s.Records() {
			if rec.RequestID == r.seen.requestID {
				recs = append(recs, rec)
			}
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Started.Before(recs[j].Started) })
	var bad []string
	for i, rec := range recs {
		if rec.Outcome == "" {
			bad = append(bad, fmt.Sprintf("attempt %s is still running on the engine after the request ended", rec.AttemptID))
			continue
		}
		if i == 0 {
			continue
		}
		prev := recs[i-1]
		// In fenced mode the proof is the agent's: it closed the engine connection of the
		// previous attempt (the engine notices a moment later, on its own).
		if a := c.agentOf(prev); a != nil {
			if ended, ok := c.agentEnded(a, prev.AttemptID); !ok || ended.After(rec.Started) {
				bad = append(bad, fmt.Sprintf("attempt %s started at %s before the agent ended %s (at %s, ok=%v)",
					rec.AttemptID, rec.Started.Format("15:04:05.000000"), prev.AttemptID, ended.Format("15:04:05.000000"), ok))
			}
			continue
		}
		// An engine that answered with an error status had finished that request when it
		// wrote the answer; it records the end a moment later, which a fast rerun may beat.
		answered := prev.Outcome == sim.OutcomeError || prev.Outcome == sim.OutcomeRejected
		if !answered && prev.Ended.After(rec.Started) {
			bad = append(bad, fmt.Sprintf("attempt %s started at %s while %s ran until %s",
				rec.AttemptID, rec.Started.Format("15:04:05.000000"), recs[i-1].AttemptID, recs[i-1].Ended.Format("15:04:05.000000")))
		}
	}
	return bad
}

// agentOf is the agent in front of the replica that served rec (nil in direct mode).
func (c *checker) agentOf(rec sim.Record) *agent.Agent {
	for _, s := range c.sims {
		for _, r := range s.Records() {
			if r.ID == rec.ID {
				return c.agents[s.Name()]
			}
		}
	}
	return nil
}

// agentEnded is when the agent closed the engine connection of an attempt.
func (c *checker) agentEnded(a *agent.Agent, attempt string) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := a.WaitEnded(ctx, attempt)
	if err != nil || info.EndedAt.IsZero() {
		return time.Time{}, false
	}
	return info.EndedAt, true
}
