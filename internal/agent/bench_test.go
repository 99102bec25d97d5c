package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// The cost the agent adds to a stream: the same 200-token stream from the
// same engine, read directly, through the agent unfenced, and through the
// agent with a lease checked before each of its 203 events. The engine is the
// simulator, vLLM's wire, and the agent is told so, as a deployment in front of vLLM
// is: a generic engine's streams each take a connection of their own (the agent closes
// it after the stream), which would put a dial in every iteration. Run with
//
//	go test -run '^$' -bench Stream -benchtime=200x ./internal/agent/
func BenchmarkStream(b *testing.B) {
	s, err := sim.Start(sim.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	clock := newFakeClock() // frozen: the lease never runs out mid-benchmark
	a, err := Start(Config{Engine: s.URL(), EngineKind: KindVLLM, Listen: "127.0.0.1:0", Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	body := chatBody(b, 200, true)

	var seq uint64 // attempt ids and epochs never repeat, however often run is called
	run := func(b *testing.B, base string, fenced bool) {
		ctx := context.Background()
		for b.Loop() {
			var l *leased
			if fenced {
				seq++
				l = &leased{attempt: fmt.Sprintf("req_bench%d.a1", seq), epoch: seq, ttl: time.Minute}
			}
			resp, err := post(b, ctx, hc, base, "/v1/chat/completions", body, l)
			if err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || n == 0 {
				b.Fatalf("read %d bytes: %v", n, err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, s.URL(), false) })
	b.Run("agent-unfenced", func(b *testing.B) { run(b, a.URL(), false) })
	b.Run("agent-fenced", func(b *testing.B) { run(b, a.URL(), true) })
}
