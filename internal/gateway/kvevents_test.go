package gateway_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/kvevents"
	"github.com/fencegate/fencegate/internal/sim"
)

// kvSims starts n simulated vLLM replicas that publish their KV events on loopback (with a
// replay socket) and serve POST /reset_prefix_cache, each caching cacheBlocks blocks of 16
// tokens.
func kvSims(t *testing.T, n, cacheBlocks int) []*sim.Server {
	t.Helper()
	var out []*sim.Server
	for i := range n {
		kc, err := sim.ParseKVEventsConfig(`{"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:0", "replay_endpoint": "tcp://127.0.0.1:0", "topic": "kv"}`)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sim.Start(sim.Config{Name: fmt.Sprintf("sim-%d", i+1), Model: "sim-model", KVEvents: kc, ServerDevMode: true,
			CacheConfig: map[string]string{"num_gpu_blocks": fmt.Sprint(cacheBlocks), "block_size": "16"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// withKVEvents sets each replica's kv_events to its sim's sockets (precise), or none.
func withKVEvents(sims []*sim.Server, precise bool) func(*config.Config) {
	return func(c *config.Config) {
		for i := range c.Models[0].Replicas {
			if !precise {
				continue
			}
			pub, replay := sims[i].KVEventsEndpoint()
			c.Models[0].Replicas[i].KVEvents = &config.KVEvents{Endpoint: pub, ReplayEndpoint: replay, Topic: "kv"}
		}
	}
}

// kvStatus is a replica's kv_events in /readyz (nil: none).
func (e *env) kvStatus(name string) map[string]any {
	for _, p := range e.readyz()["models"].([]any) {
		for _, r := range p.(map[string]any)["replicas"].([]any) {
			if m := r.(map[string]any); m["name"] == name {
				kv, _ := m["kv_events"].(map[string]any)
				return kv
			}
		}
	}
	return nil
}

// waitKV polls /readyz until the replica's kv_events satisfy cond: a bounded loop (400
// looks, 25 ms apart), never a pacing sleep.
func (e *env) waitKV(name, what string, cond func(map[string]any) bool) map[string]any {
	e.t.Helper()
	var kv map[string]any
	for range 400 {
		if kv = e.kvStatus(name); kv != nil && cond(kv) {
			return kv
		}
		<-time.After(25 * time.Millisecond)
	}
	e.t.Fatalf("%s: kv_events never %s: %v", name, what, kv)
	return nil
}

// caughtUp waits until every request sim served has ended (its blocks are cached and
// their events queued) and the gateway has applied the last batch sim queued.
func (e *env) caughtUp(i int) map[string]any {
	e.t.Helper()
	s := e.sims[i]
	for _, r := range s.Records() {
		if r.Outcome == "" {
			if _, err := s.WaitRecord(testCtx(e.t.(*testing.T)), func(x sim.Record) bool { return x.ID == r.ID && x.Outcome != "" }); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	last := s.KVEventsQueued() - 1
	return e.waitKV(s.Name(), fmt.Sprintf("at batch %d", last), func(kv map[string]any) bool {
		return int64(kv["last_seq"].(float64)) == last
	})
}

// The gateway's record of each replica follows the replica's KV events: the blocks its
// engine holds are those the sim's cache holds, the ratio is learned and the state live.
func TestKVEventsRecordFollowsTheEngine(t *testing.T) {
	sims := kvSims(t, 2, 200)
	e := newEnv(t, envOptions{sims: sims, config: withKVEvents(sims, true)})
	for i := range 8 {
		if i == 4 {
			setReplicaState(t, e, "sim-1", "draining") // the rest to sim-2
		}
		conv := newConversation(fmt.Sprintf("System %d. ", i) + strings.Repeat("Keep to the facts. ", 30))
		conv.turn(t, e, strings.Repeat(fmt.Sprintf("question %d ", i), 40))
	}
	for i, s := range sims {
		kv := e.caughtUp(i)
		if kv["state"] != "live" || int(kv["engine_blocks"].(float64)) != s.CachedBlocks() {
			t.Fatalf("%s: %v; want live with the sim's %d blocks", s.Name(), kv, s.CachedBlocks())
		}
	}
	m := e.metrics()
	for _, want := range []string{`fencegate_replica_kv_events{model="sim-model",replica="sim-1",state="live"} 1`,
		`fencegate_replica_kv_events{model="sim-model",replica="sim-1",state="degraded"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// POST /reset_prefix_cache empties the engine's cache and publishes AllBlocksCleared: the
// gateway's record of that replica is emptied too.
func TestKVEventsAllBlocksClearedClearsTheRecord(t *testing.T) {
	sims := kvSims(t, 1, 200)
	e := newEnv(t, envOptions{sims: sims, replicas: 1, config: withKVEvents(sims, true)})
	newConversation(longSystem).turn(t, e, strings.Repeat("tell me more ", 30))
	e.caughtUp(0)
	if strings.Contains(e.metrics(), `fencegate_replica_prefix_blocks{model="sim-model",of="recorded",replica="sim-1"} 0`) {
		t.Fatal("nothing recorded after a turn")
	}
	resp := post(t, sims[0].URL()+"/reset_prefix_cache", "")
	if readAll(t, resp); resp.StatusCode != 200 || sims[0].CachedBlocks() != 0 {
		t.Fatalf("reset: %d, %d blocks left", resp.StatusCode, sims[0].CachedBlocks())
	}
	kv := e.caughtUp(0)
	if kv["engine_blocks"].(float64) != 0 {
		t.Fatalf("engine blocks %v after AllBlocksCleared", kv["engine_blocks"])
	}
	if !strings.Contains(e.metrics(), `fencegate_replica_prefix_blocks{model="sim-model",of="recorded",replica="sim-1"} 0`) {
		t.Fatal("the record was not emptied by AllBlocksCleared")
	}
}

// testPublisher is an engine's KV event sockets, driven by the test: a PUB socket and a
// ROUTER replay socket that answers from the batches kept, as vLLM's does.
type testPublisher struct {
	t        *testing.T
	pub      zmq4.Socket
	endpoint string
	replayAt string
	kept     map[int64][]byte
	mu       chan struct{} // a one-slot lock over kept, shared with the replay goroutine
}

func newTestPublisher(t *testing.T, replay bool) *testPublisher {
	return newTestPublisherFraming(t, replay, true)
}

// newTestPublisherFraming is newTestPublisher whose replay answers as vLLM 0.26 and later
// do, with the topic in each message (withTopic), or as vLLM up to 0.25, without it.
func newTestPublisherFraming(t *testing.T, replay, withTopic bool) *testPublisher {
	ctx := testCtx(t)
	tp := &testPublisher{t: t, pub: zmq4.NewPub(ctx), kept: map[int64][]byte{}, mu: make(chan struct{}, 1)}
	t.Cleanup(func() { tp.pub.Close() })
	if err := tp.pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	tp.endpoint = "tcp://" + tp.pub.Addr().String()
	if !replay {
		return tp
	}
	router := zmq4.NewRouter(ctx)
	if err := router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	tp.replayAt = "tcp://" + router.Addr().String()
	done := make(chan struct{})
	t.Cleanup(func() { router.Close(); <-done })
	go func() {
		defer close(done)
		for {
			m, err := router.Recv()
			if err != nil {
				return
			}
			start := int64(binary.BigEndian.Uint64(m.Frames[2]))
			tp.mu <- struct{}{}
			answer := func(topic []byte, seq int64, payload []byte) {
				if withTopic {
					_ = router.Send(zmq4.NewMsgFrom(m.Frames[0], nil, topic, seqBytes(seq), payload))
				} else {
					_ = router.Send(zmq4.NewMsgFrom(m.Frames[0], nil, seqBytes(seq), payload))
				}
			}
			for seq := start; tp.kept[seq] != nil; seq++ {
				answer([]byte("kv"), seq, tp.kept[seq])
			}
			<-tp.mu
			answer(nil, -1, nil)
		}
	}()
	return tp
}

func seqBytes(seq int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq))
	return b[:]
}

// send keeps batch seq (one block stored) for the replay and, when live, publishes it.
func (tp *testPublisher) send(seq int64, live bool) {
	payload, err := kvevents.EncodeBatch(kvevents.Batch{TS: 1, DPRank: 0, Events: []kvevents.Event{{Kind: kvevents.Stored,
		Hashes: []kvevents.Hash{kvevents.IntHash(uint64(seq + 1))}, TokenIDs: make([]uint32, 16), BlockSize: 16, Medium: "GPU"}}})
	if err != nil {
		tp.t.Fatal(err)
	}
	tp.mu <- struct{}{}
	tp.kept[seq] = payload
	<-tp.mu
	if live {
		if err := tp.pub.Send(zmq4.NewMsgFrom([]byte("kv"), seqBytes(seq), payload)); err != nil {
			tp.t.Fatal(err)
		}
	}
}

// subscribed publishes batch 0 until the gateway has it (a PUB socket drops what it sends
// before a subscriber's subscription reached it): bounded.
func (tp *testPublisher) subscribed(e *env) {
	for i := 0; ; i++ {
		tp.send(0, true)
		if kv := e.kvStatus("sim-1"); kv != nil && kv["state"] == "live" {
			return
		}
		if i == 400 {
			tp.t.Fatal("batch 0 never arrived")
		}
		<-time.After(25 * time.Millisecond)
	}
}

// A gap in the batches is asked from the engine's replay socket, which fills it (in the
// framings of vLLM 0.26 and of the versions before): the replica stays live, and its
// blocks are all counted.
func TestKVEventsReplayFillsAGap(t *testing.T) {
	t.Run("vLLM 0.26", func(t *testing.T) { testKVReplayFillsAGap(t, true) })
	t.Run("vLLM 0.25", func(t *testing.T) { testKVReplayFillsAGap(t, false) })
}

func testKVReplayFillsAGap(t *testing.T, withTopic bool) {
	tp := newTestPublisherFraming(t, true, withTopic)
	e := newEnv(t, envOptions{replicas: 1, config: func(c *config.Config) {
		c.Models[0].Replicas[0].KVEvents = &config.KVEvents{Endpoint: tp.endpoint, ReplayEndpoint: tp.replayAt, Topic: "kv"}
	}})
	tp.subscribed(e)
	tp.send(1, true)
	for seq := int64(2); seq <= 4; seq++ {
		tp.send(seq, false) // lost on the way, kept for the replay
	}
	tp.send(5, true)
	kv := e.waitKV("sim-1", "at batch 5", func(kv map[string]any) bool { return kv["last_seq"].(float64) == 5 })
	if kv["state"] != "live" || kv["engine_blocks"].(float64) != 6 {
		t.Fatalf("%v; want live with the 6 blocks of batches 0 to 5", kv)
	}
}

// A gap the engine cannot replay (it has no replay socket here) degrades the replica to the
// approximate record, and the metric and /readyz say why.
func TestKVEventsLostBatchesDegrade(t *testing.T) {
	tp := newTestPublisher(t, false)
	e := newEnv(t, envOptions{replicas: 1, config: func(c *config.Config) {
		c.Models[0].Replicas[0].KVEvents = &config.KVEvents{Endpoint: tp.endpoint, Topic: "kv"}
	}})
	tp.subscribed(e)
	tp.send(1, true)
	e.waitKV("sim-1", "at batch 1", func(kv map[string]any) bool { return kv["last_seq"].(float64) == 1 })
	tp.send(5, true) // 2 to 4 lost
	kv := e.waitKV("sim-1", "degraded", func(kv map[string]any) bool { return kv["state"] == "degraded" })
	if !strings.Contains(kv["reason"].(string), "batches 2 to 4 are lost") {
		t.Fatalf("reason %q", kv["reason"])
	}
	m := e.metrics()
	if !strings.Contains(m, `fencegate_replica_kv_events{model="sim-model",replica="sim-1",state="degraded"} 1`) {
		t.Fatal("the metric does not say degraded")
	}
}

// The precise mode keeps a conversation on the replica that still holds it: its first
// two turns ran on sim-1, its first also on sim-2; then sim-1's cache was filled with other
// prompts, evicting the conversation there. The next turn goes to sim-2, which holds its
// beginning. Without events the record of sim-1, sized generously, still holds both turns,
// and the turn goes back to sim-1, where nothing of it is cached.
func TestKVEventsKeepConversationWhereItIsCached(t *testing.T) {
	for _, precise := range []bool{true, false} {
		t.Run(map[bool]string{true: "precise", false: "approximate"}[precise], func(t *testing.T) {
			sims := kvSims(t, 2, 100) // 1,600 tokens each
			e := newEnv(t, envOptions{sims: sims, config: withKVEvents(sims, precise)})
			conv := newConversation("You guide visitors through the harbour. " + strings.Repeat("Be short. ", 20))
			setReplicaState(t, e, "sim-1", "draining")
			first := conv.turn(t, e, "Where is the lighthouse? "+strings.Repeat("Tell me. ", 20))
			if i, _ := servedBy(t, e, first.requestID); i != 1 {
				t.Fatalf("turn 1 went to sim-%d, want sim-2 (sim-1 draining)", i+1)
			}
			setReplicaState(t, e, "sim-1", "active")
			setReplicaState(t, e, "sim-2", "draining")
			p := chatParams("", 8)
			p.Messages = conv.msgs[:2] // turn 1 again, now on sim-1
			if r := e.stream(testCtx(t), p); r.err != nil {
				t.Fatal(r.err)
			}
			conv.turn(t, e, "And the old harbour wall? "+strings.Repeat("Tell me more. ", 20))
			// Other conversations fill sim-1's cache: the conversation is evicted there. Sixty
			// of them, twice what pushes it out of sim-1's precise record at the ratio its
			// events usually teach (54 blocks at 4.4 bytes a token): the ratio depends on when
			// each batch arrives against the requests it follows, and thirty were too few at
			// 5.1 (64 blocks) on a busy machine. The approximate record holds 1,024.
			for i := range 60 {
				newConversation(fmt.Sprintf("Flood %d. ", i)+strings.Repeat("Something else entirely. ", 12)).
					turn(t, e, strings.Repeat(fmt.Sprintf("unrelated %d ", i), 30))
			}
			setReplicaState(t, e, "sim-2", "active")
			if precise {
				if kv := e.caughtUp(0); kv["state"] != "live" || kv["bytes_per_token"] == nil {
					t.Fatalf("sim-1: %v; want live with a learned ratio", kv)
				}
			}
			third := conv.turn(t, e, "Is the lighthouse open today? "+strings.Repeat("Tell me. ", 10))
			i, rec := servedBy(t, e, third.requestID)
			if precise && (i != 1 || rec.CachedTokens == 0) {
				t.Fatalf("precise: turn 3 went to sim-%d with %d tokens cached; want sim-2, which holds its start", i+1, rec.CachedTokens)
			}
			if !precise && (i != 0 || rec.CachedTokens > 32) {
				t.Fatalf("approximate: turn 3 went to sim-%d with %d tokens cached; the generous record sends it back to sim-1, which evicted it", i+1, rec.CachedTokens)
			}
		})
	}
}
