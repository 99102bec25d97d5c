package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/internal/trace"
)

// writeTrace writes one violation of case c as a trace document in dir: the request as the
// client sent it (its X-Sim-Fault header included, so that a replay meets the same fault),
// the replicas' engine requests as its attempts, what the client received, and how it
// ended; Note names the rule broken. It returns the file's path.
func writeTrace(dir string, c sweepCase, v violation, cl *caseClient, h *wireHistory, verdict wireVerdict, engines map[string]string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	id := fmt.Sprintf("chaos-%03d-%s", c.n, strings.NewReplacer("@", "-at-", ":", "-", " ", "-").Replace(c.String()))
	if rid := cl.header.Get("X-Request-Id"); rid != "" {
		id = rid // the target's own name for the request, if it gives one
	}
	outcome := verdict.ending
	switch {
	case outcome == "" && cl.status != 0 && cl.status != 200:
		outcome = "failed"
	case outcome == "":
		outcome = "cut"
	}
	doc := trace.Document{
		Format:    trace.Format,
		RequestID: id,
		Source:    "chaos",
		Request: trace.Request{ReceivedAt: cl.sentAt, Method: "POST", Path: cl.requestPath, Headers: trace.RedactHeaders(cl.reqHeader),
			Body: trace.BodyJSON(cl.requestBody), Sampling: trace.Sampling(cl.requestBody)},
		Attempts: attemptsOf(h.records, engines),
		Received: cl.kept.Received(cl.status, cl.contentType),
		Outcome: trace.Outcome{Outcome: outcome, Error: verdict.errorBody, DeliveredOutputTokens: verdict.tokens,
			FirstDeltaAt: cl.firstOutputAt, EndedAt: cl.endedAt},
		Note: fmt.Sprintf("%s: %s (case %d, %s)", v.rule, v.text, c.n, c),
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%03d-%s-%s.json", c.n, strings.NewReplacer("@", "-at-", ":", "-", " ", "-").Replace(c.String()), v.rule))
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	return path, nil
}
