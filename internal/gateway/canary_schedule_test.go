package gateway

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
)

// The canary runs one period after it is first seen, then every period, and at the next
// tick when a replica joins the pool or passes a probe after failing one.
func TestCanaryScheduleAndRejoin(t *testing.T) {
	cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m",
		Replicas: []config.Replica{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:2"}},
		Canary:   &config.Canary{Every: config.Duration(time.Minute)}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p := newPool(cfg.Models[0], cfg, t0)
	p.reconcile(s, "config", []replicaSpec{{Replica: cfg.Models[0].Replicas[0]}}, true)
	done := func() { p.canaryRun.running = false } // what the end of a check does

	if p.beginCanary(true, t0) || p.beginCanary(true, t0.Add(59*time.Second)) {
		t.Fatal("a check before the first period")
	}
	if !p.beginCanary(true, t0.Add(time.Minute)) {
		t.Fatal("no check after a period")
	}
	if p.beginCanary(true, t0.Add(2*time.Minute)) || p.beginCanary(false, t0) {
		t.Fatal("a second check while one runs")
	}
	done()
	p.canaryRun.next = t0.Add(2 * time.Minute)
	now := t0.Add(70 * time.Second)

	// A replica that fails a probe and passes again (re)joins.
	p.probeResult("127.0.0.1:1", true, "")
	if p.beginCanary(true, now) {
		t.Fatal("a passing probe of a replica that never failed kicked the canary")
	}
	p.probeResult("127.0.0.1:1", false, "probe: refused")
	p.probeResult("127.0.0.1:1", true, "")
	if !p.beginCanary(true, now) {
		t.Fatal("a replica back from a failed probe was not checked")
	}
	done()

	// A replica that joins (reload, DNS) is checked once its first probe passes.
	specs := []replicaSpec{{Replica: cfg.Models[0].Replicas[0]}, {Replica: cfg.Models[0].Replicas[1]}}
	p.reconcile(s, "config", specs, false)
	if p.beginCanary(true, now) {
		t.Fatal("checked before the new replica was probed")
	}
	p.probeResult("127.0.0.1:2", true, "")
	if !p.beginCanary(true, now) {
		t.Fatal("a joining replica was not checked")
	}
	done()

	// Without a canary nothing is ever due.
	p.canary = nil
	if p.beginCanary(true, t0.Add(time.Hour)) || p.beginCanary(false, t0) {
		t.Fatal("a check without a canary")
	}
}
