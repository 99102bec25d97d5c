package gateway_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
)

// The gateway logs each replica the first time it finds it healthy, with the engine's kind,
// version and weights, and logs once that a pool has no healthy replica, again only after
// one came back in between. Probe rounds are driven by POST /admin/refresh.
func TestServeLogsTheReplicasItFinds(t *testing.T) {
	s := startSim(t, sim.Config{Name: "sim-1", Version: "0.11.2", Revision: "r3"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	cfg := &config.Config{Store: "memory:", AdminListen: "127.0.0.1:0", Models: []config.Model{
		{Name: "sim-model", Replicas: []config.Replica{{Name: "sim-1", URL: s.URL()}}},
		{Name: "gone-model", Replicas: []config.Replica{{Name: "gone", URL: down}}},
	}}
	// No background round during the test: the refreshes below are the only ones.
	cfg.Health.ProbeEvery, cfg.Health.ScrapeEvery = config.Duration(time.Hour), config.Duration(time.Hour)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var sink syncBuffer
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{Logger: slog.New(slog.NewJSONHandler(&sink, nil))})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start() // one scrape and probe round before it returns
	t.Cleanup(func() { gw.Close() })
	admin := h1servertest.NewServer(gw.AdminHandler())
	t.Cleanup(admin.Close)
	refresh := func() {
		t.Helper()
		resp, err := http.Post(admin.URL+"/admin/refresh", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	count := func(msg, model string) (n int, last map[string]any) {
		for _, l := range sink.lines() {
			if l["msg"] == msg && l["model"] == model {
				n, last = n+1, l
			}
		}
		return n, last
	}
	refresh()
	refresh()
	n, l := count("replica found healthy", "sim-model")
	if n != 1 || l["replica"] != "sim-1" || l["engine"] != "vllm" || l["engine_version"] != "0.11.2" || l["url"] != s.URL() {
		t.Fatalf("%d found-healthy lines, the last %v", n, l)
	}
	if n, l := count("no healthy replica: the model's requests get 503 no_healthy_replica until one is", "gone-model"); n != 1 || l["level"] != "WARN" {
		t.Fatalf("%d no-healthy lines for gone-model, the last %v", n, l)
	}
	none := "no healthy replica: the model's requests get 503 no_healthy_replica until one is"
	if n, _ := count(none, "sim-model"); n != 0 {
		t.Fatalf("sim-model has a healthy replica, yet %d lines say it has none", n)
	}
	// sim-1 goes away: one line; it comes back: no new found-healthy line (only the
	// first); it goes away again: one more line.
	s.Crash()
	refresh()
	refresh()
	if n, _ := count(none, "sim-model"); n != 1 {
		t.Fatalf("%d no-healthy lines after sim-1 went away, want 1", n)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	refresh()
	s.Crash()
	refresh()
	if n, _ := count(none, "sim-model"); n != 2 {
		t.Fatalf("%d no-healthy lines after sim-1 went away twice, want 2", n)
	}
	if n, _ := count("replica found healthy", "sim-model"); n != 1 {
		t.Fatalf("%d found-healthy lines for sim-1, want 1", n)
	}
}
