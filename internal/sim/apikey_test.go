package sim

import (
	"net/http"
	"strings"
	"testing"
)

// With an API key, /v1 needs it as vLLM's middleware requires; /health and /metrics do not.
func TestAPIKey(t *testing.T) {
	s, err := Start(Config{Name: "keyed", APIKey: "engine-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	do := func(method, path, auth string) int {
		req, _ := http.NewRequest(method, s.URL()+path, strings.NewReader(`{"model":"sim-model","messages":[{"role":"user","content":"x"}],"max_tokens":2}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, path, auth string
		want               int
	}{
		{"POST", "/v1/chat/completions", "", 401},
		{"POST", "/v1/chat/completions", "Bearer wrong", 401},
		{"POST", "/v1/chat/completions", "Bearer engine-secret", 200},
		{"GET", "/v1/models", "", 401},
		{"GET", "/health", "", 200},
		{"GET", "/metrics", "", 200},
	} {
		if got := do(tc.method, tc.path, tc.auth); got != tc.want {
			t.Errorf("%s %s (%q): %d, want %d", tc.method, tc.path, tc.auth, got, tc.want)
		}
	}
}
