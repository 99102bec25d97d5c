package gateway_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// guideResult is what testdata/sdkclients/guide.mjs printed: the text a snippet received
// and the gateway's error object it found (nil when the answer completed).
type guideResult struct {
	Text  string        `json:"text"`
	Error *GatewayError `json:"error"`
	First *guideResult  `json:"first"`
}

// nodeGuide runs one scenario of guide.mjs, the Node snippets of docs/clients.md, against
// the gateway at baseURL. Like nodeClient it needs Node.js and the pinned SDKs.
func nodeGuide(t *testing.T, scenario, baseURL, prompt string, maxTokens int) guideResult {
	t.Helper()
	dir, _ := filepath.Abs("testdata/sdkclients")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "openai"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Node SDK clients are not installed (npm ci in %s): %v", dir, err)
		}
		t.Skipf("the Node SDK clients are not installed (npm ci in %s)", dir)
	}
	cmd := exec.CommandContext(testCtx(t), node, filepath.Join(dir, "guide.mjs"), scenario, baseURL, "sim-model", prompt, strconv.Itoa(maxTokens))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node guide.mjs %s: %v", scenario, err)
	}
	var r guideResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &r); err != nil {
		t.Fatalf("guide.mjs printed %q: %v", out, err)
	}
	return r
}

// The Node snippets find the interruption with its fields on every API, and continue a
// cut chat answer into the whole answer on the replica that wrote it.
func TestGuideNode(t *testing.T) {
	for _, scenario := range []string{"chat", "messages", "responses"} {
		t.Run(scenario, func(t *testing.T) {
			e := guideEnv(t)
			e.armAll("reset@sent:2")
			r := nodeGuide(t, scenario, e.srv.URL, "tell me", 100)
			wantInterruption(t, r.Error, nil, 3)
			if len(strings.Fields(r.Text)) != 3 {
				t.Fatalf("received %q", r.Text)
			}
		})
	}
	t.Run("continue", func(t *testing.T) {
		e := guideEnv(t)
		whole := e.direct(0, guideChat("tell me a story"))
		e.armAll("reset@sent:3")
		r := nodeGuide(t, "continue", e.srv.URL, "tell me a story", 100)
		if r.First == nil {
			t.Fatal("no first answer")
		}
		wantInterruption(t, r.First.Error, nil, 4)
		if r.Error != nil || r.Text != whole {
			t.Fatalf("continued answer %q (%+v), want the whole answer %q", r.Text, r.Error, whole)
		}
	})
}
