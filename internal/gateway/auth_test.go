package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
)

const (
	keyA     = "team-a-key-0123456789"
	keyB     = "team-b-key-0123456789"
	adminKey = "admin-key-0123456789"
)

func authed(t *testing.T, method, url, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// With keys configured, /v1 needs one; a request's journal is readable by the key that made
// it and by an admin key only; the admin endpoint needs an admin key.
func TestAPIKeys(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.AdminListen = "" // one listener: the admin endpoint is beside the API
		c.Auth = config.Auth{Keys: []config.APIKey{{ID: "team-a", Key: keyA}, {ID: "team-b", Key: keyB}},
			AdminKeys: []config.APIKey{{ID: "ops", Key: adminKey}}}
	}})
	body := streamBody("authorised", 2)
	if r := authed(t, "POST", e.srv.URL+"/v1/chat/completions", "", body); r.StatusCode != 401 {
		t.Fatalf("no key: %d", r.StatusCode)
	}
	if r := authed(t, "POST", e.srv.URL+"/v1/chat/completions", "wrong-key-0123456789", body); r.StatusCode != 401 {
		t.Fatalf("wrong key: %d", r.StatusCode)
	}
	ok := authed(t, "POST", e.srv.URL+"/v1/chat/completions", keyA, body)
	readAll(t, ok)
	id := ok.Header.Get("X-Request-Id")
	if ok.StatusCode != 200 {
		t.Fatalf("team-a: %d", ok.StatusCode)
	}
	for key, want := range map[string]int{keyA: 200, adminKey: 200, keyB: 404} {
		if r := authed(t, "GET", e.srv.URL+"/v1/requests/"+id+"?wait=10s", key, ""); r.StatusCode != want {
			t.Errorf("GET by %s: %d, want %d", key[:6], r.StatusCode, want)
		}
	}
	if r := authed(t, "POST", e.srv.URL+"/admin/replicas/sim-model/sim-1", keyA, `{"state":"draining"}`); r.StatusCode != 403 {
		t.Fatalf("admin endpoint with a tenant key: %d", r.StatusCode)
	}
	if r := authed(t, "POST", e.srv.URL+"/admin/replicas/sim-model/sim-1", adminKey, `{"state":"draining"}`); r.StatusCode != 200 {
		t.Fatalf("admin endpoint with an admin key: %d", r.StatusCode)
	}
}
