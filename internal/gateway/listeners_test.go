package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/tidwall/gjson"
)

// A body that trickles in slower than server.body_read_timeout is cut and answered 408 in
// the API's error shape, and the connection closed. The deadline covers the body only: a
// stream that runs longer than it, and the next request on the same connection, are not
// touched by it.
func TestBodyReadTimeout(t *testing.T) {
	s, err := sim.Start(sim.Config{Name: "sim-1", Model: "sim-model", DecodePerToken: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h := startTenantGWNoCleanup(t, []*sim.Server{s}, func(c *config.Config) {
		c.Server.BodyReadTimeout = config.Duration(300 * time.Millisecond)
	})
	t.Cleanup(h.close)
	addr := strings.TrimPrefix(h.url, "http://")
	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/responses"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		// 100 bytes announced, 9 sent, then nothing: the client is still "sending".
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":", path)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		wantAPIError(t, "a trickling body", path, resp.StatusCode, resp.Header, string(b), 408, "body_read_timeout")
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: the connection stayed open after the 408 (%v)", path, err)
		}
		c.Close()
	}
	if n := len(s.Records()); n != 0 {
		t.Errorf("%d cut requests reached the replica", n)
	}

	// Two streams of 0.6 s each on one kept-alive connection, both complete.
	tr := &http.Transport{MaxConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	for i := range 2 {
		resp, err := hc.Post(h.url+"/v1/chat/completions", "application/json", strings.NewReader(streamBody("slow", 6)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") || strings.Count(string(b), `"content":"`) < 6 {
			t.Fatalf("stream %d longer than the body timeout: %d %v\n%s", i, resp.StatusCode, err, b)
		}
	}
}

// With admin_listen the public handler serves the API and /healthz only; the admin handler
// serves the rest, its admin calls and pprof open when the admin listener is on loopback
// and behind an admin key when it is not. Without admin_listen one handler serves
// everything but pprof.
func TestAdminListenerSplit(t *testing.T) {
	sims := startSims(t, 1)
	const tenant, admin = "tenant-key-0123456789", "admin-key-0123456789"
	keys := func(c *config.Config) {
		c.Models = c.Models[:1] // one pool, whose replica serves it: /readyz is 200
		c.Auth.Keys = []config.APIKey{{ID: "t", Key: tenant}}
		c.Auth.AdminKeys = []config.APIKey{{ID: "ops", Key: admin}}
	}
	check := func(what, url, method, key string, want int) {
		t.Helper()
		a := send(t, method, url, key, "")
		if a.status != want {
			t.Errorf("%s: %s %s: %d, want %d (%s)", what, method, url, a.status, want, a.body)
		}
		if a.status >= 400 && !gjson.Valid(a.body) {
			t.Errorf("%s: %s %s: not an API error: %s", what, method, url, a.body)
		}
	}

	loop := startTenantGW(t, tenantOptions{sims: sims, config: func(c *config.Config) { keys(c); c.AdminListen = "127.0.0.1:0" }})
	loopAdmin := h1servertest.NewServer(loop.gw.AdminHandler())
	t.Cleanup(loopAdmin.Close)
	for _, p := range []string{"/metrics", "/readyz", "/debug/pprof/", "/admin"} {
		check("public with admin_listen", loop.url+p, "GET", admin, 404)
	}
	check("public with admin_listen", loop.url+"/admin/refresh", "POST", admin, 404)
	check("public with admin_listen", loop.url+"/healthz", "GET", "", 200)
	check("public with admin_listen", loop.url+"/v1/models", "GET", tenant, 200)
	check("loopback admin", loopAdmin.URL+"/admin/refresh", "POST", "", 200)
	check("loopback admin", loopAdmin.URL+"/debug/pprof/", "GET", "", 200)
	check("loopback admin", loopAdmin.URL+"/metrics", "GET", "", 200)
	check("loopback admin", loopAdmin.URL+"/v1/models", "GET", tenant, 404)

	wide := startTenantGW(t, tenantOptions{sims: sims, config: func(c *config.Config) { keys(c); c.AdminListen = "0.0.0.0:0" }})
	wideAdmin := h1servertest.NewServer(wide.gw.AdminHandler())
	t.Cleanup(wideAdmin.Close)
	for _, p := range []string{"/admin/refresh", "/admin/reload"} {
		check("reachable admin", wideAdmin.URL+p, "POST", "", 401)
		check("reachable admin", wideAdmin.URL+p, "POST", tenant, 403)
	}
	check("reachable admin", wideAdmin.URL+"/admin/refresh", "POST", admin, 200)
	check("reachable admin", wideAdmin.URL+"/debug/pprof/", "GET", tenant, 403)
	check("reachable admin", wideAdmin.URL+"/debug/pprof/", "GET", admin, 200)
	check("reachable admin", wideAdmin.URL+"/metrics", "GET", "", 200)
	check("reachable admin", wideAdmin.URL+"/readyz", "GET", "", 200)

	one := startTenantGW(t, tenantOptions{sims: sims, config: keys})
	check("one listener", one.url+"/metrics", "GET", "", 401)
	check("one listener", one.url+"/metrics", "GET", tenant, 403)
	check("one listener", one.url+"/metrics", "GET", admin, 200)
	check("one listener", one.url+"/readyz", "GET", "", 200)
	check("one listener", one.url+"/admin/refresh", "POST", admin, 200)
	check("one listener", one.url+"/debug/pprof/", "GET", admin, 404)
}
