package gateway_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeClient runs testdata/sdkclients/client.mjs, a client written with the official Node
// SDKs. It needs Node.js and the pinned SDKs (npm ci in that folder, which .ci/run does):
// in CI their absence fails the test, elsewhere it skips it.
func nodeClient(t *testing.T, api, baseURL, prompt string, maxTokens string) nodeResult {
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
	cmd := exec.CommandContext(testCtx(t), node, filepath.Join(dir, "client.mjs"), api, baseURL, "sim-model", prompt, maxTokens)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client: %v", err)
	}
	var r nodeResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &r); err != nil {
		t.Fatalf("node client printed %q: %v", out, err)
	}
	return r
}

type nodeResult struct {
	OK    bool   `json:"ok"`
	Text  string `json:"text"`
	Error struct {
		Status  *int            `json:"status"`
		Message string          `json:"message"`
		Body    json.RawMessage `json:"body"`
	} `json:"error"`
}

// The official Node SDKs see a normal stream complete, and an interruption raised as an
// error that carries upstream_decode_interrupted, on every API.
func TestNodeSDKs(t *testing.T) {
	for _, api := range []string{"chat", "messages", "responses"} {
		t.Run(api, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			if r := nodeClient(t, api, e.srv.URL, "hello from node", "6"); !r.OK || len(strings.Fields(r.Text)) != 6 {
				t.Fatalf("healthy stream: %+v", r)
			}
			e.armAll("crash@sent:1")
			r := nodeClient(t, api, e.srv.URL, "cut me off", "8")
			if r.OK || r.Text == "" || !strings.Contains(string(r.Error.Body)+r.Error.Message, "upstream_decode_interrupted") {
				t.Fatalf("interrupted stream: %+v (%s)", r, r.Error.Body)
			}
		})
	}
}
