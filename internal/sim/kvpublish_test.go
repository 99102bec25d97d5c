package sim

import (
	"context"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fencegate/fencegate/internal/kvevents"
)

// kvMessage is one message off the replica's PUB socket.
type kvMessage struct {
	topic string
	seq   int64
	batch kvevents.Batch
}

// subscribeKV subscribes to s's KV events and returns their messages, decoded. The
// reader ends with the test.
func subscribeKV(t *testing.T, s *Server, topic string) <-chan kvMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub := zmq4.NewSub(ctx)
	ep, _ := s.KVEventsEndpoint()
	if err := sub.SetOption(zmq4.OptionSubscribe, topic); err != nil {
		t.Fatal(err)
	}
	if err := sub.Dial(ep); err != nil {
		t.Fatal(err)
	}
	out := make(chan kvMessage, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
				t.Errorf("message of %d frames", len(msg.Frames))
				continue
			}
			b, err := kvevents.DecodeBatch(msg.Frames[2])
			if err != nil {
				t.Errorf("decoding: %v", err)
				continue
			}
			out <- kvMessage{string(msg.Frames[0]), int64(binary.BigEndian.Uint64(msg.Frames[1])), b}
		}
	}()
	t.Cleanup(func() { cancel(); _ = sub.Close(); <-done })
	return out
}

// nextKV waits for the next message (bounded by testTimeout).
func nextKV(t *testing.T, ch <-chan kvMessage) kvMessage {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(testTimeout):
		t.Fatal("no KV event batch")
	}
	return kvMessage{}
}

// untilSubscribed sends requests whose prompts are new until a batch arrives: a PUB socket
// drops what it publishes before the subscription has reached it. Bounded: 100 tries.
func untilSubscribed(t *testing.T, s *Server, c *http.Client, ch <-chan kvMessage) kvMessage {
	t.Helper()
	for i := range 100 {
		postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest(strings.Repeat("warm ", 40)+string(rune('a'+i%26))+strings.Repeat("x", i), nil)), nil)
		select {
		case m := <-ch:
			return m
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("no batch after 100 requests")
	return kvMessage{}
}

func kvConfig() *KVEventsConfig {
	c, _ := ParseKVEventsConfig(`{"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:0", "replay_endpoint": "tcp://127.0.0.1:0", "topic": "kv@sim"}`)
	return c
}

func TestKVEventsFollowThePrefixCache(t *testing.T) {
	s := startSim(t, Config{KVEvents: kvConfig(), ServerDevMode: true,
		CacheConfig: map[string]string{"num_gpu_blocks": "40", "block_size": "16"}})
	c := newClient(t)
	ch := subscribeKV(t, s, "kv@sim")
	first := untilSubscribed(t, s, c, ch)
	if first.topic != "kv@sim" || first.batch.DPRank != 0 {
		t.Fatalf("topic %q rank %d", first.topic, first.batch.DPRank)
	}
	// A long prompt: its full blocks are stored in runs, each chained to the block before
	// (the warm-up's answer may be published first).
	postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest(strings.Repeat("the prefix cache ", 60), nil)), nil)
	last := first.seq
	stored := 0
	for i := 0; stored < 5 && i < 4; i++ {
		m := nextKV(t, ch)
		if m.seq != last+1 {
			t.Fatalf("seq %d after %d", m.seq, last)
		}
		last = m.seq
		for _, e := range m.batch.Events {
			if e.Kind != kvevents.Stored || e.BlockSize != 16 || e.Medium != "GPU" || e.Tokens != 16*len(e.Hashes) {
				t.Fatalf("event %+v, want BlockStored of 16-token GPU blocks", e)
			}
			if len(e.Hashes) >= 5 {
				stored = len(e.Hashes)
			}
		}
	}
	if stored < 5 {
		t.Fatal("no batch stored the blocks of a prompt of about 240 tokens")
	}
	// More prompts than the cache holds: evictions are published.
	removed := 0
	for i := 0; removed == 0 && i < 10; i++ {
		postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest(strings.Repeat(string(rune('k'+i))+" fills the cache ", 50), nil)), nil)
		for _, e := range nextKV(t, ch).batch.Events {
			if e.Kind == kvevents.Removed {
				removed += len(e.Hashes)
			}
		}
	}
	if removed == 0 {
		t.Fatal("no BlockRemoved once the cache was full")
	}
	// POST /reset_prefix_cache (dev mode) publishes AllBlocksCleared — once no request
	// runs (the last one may still hold its slot after its answer was read): bounded
	// retries.
	cleared := false
	for i := 0; !cleared && i < 50; i++ {
		if code, _ := postJSON(t, c, s.URL()+"/reset_prefix_cache", nil, nil); code != http.StatusOK {
			t.Fatalf("reset: %d", code)
		}
		for drained := false; !drained && !cleared; {
			select {
			case m := <-ch:
				cleared = len(m.batch.Events) == 1 && m.batch.Events[0].Kind == kvevents.Cleared
			case <-time.After(50 * time.Millisecond):
				drained = true
			}
		}
	}
	if !cleared {
		t.Fatal("no AllBlocksCleared after a reset")
	}
	// The replay socket sends the batches from a sequence number on, then -1.
	_, replayAt := s.KVEventsEndpoint()
	got := replayKV(t, replayAt, first.seq)
	if len(got) < 3 || got[0] != first.seq {
		t.Fatalf("replayed %v, want from %d on", got, first.seq)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("replayed %v: not consecutive", got)
		}
	}
}

// replayKV asks the replay socket for the batches from start on and returns their
// sequence numbers.
func replayKV(t *testing.T, endpoint string, start int64) []int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := zmq4.NewDealer(ctx)
	defer d.Close()
	if err := d.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	var req [8]byte
	binary.BigEndian.PutUint64(req[:], uint64(start))
	if err := d.Send(zmq4.NewMsgFrom(nil, req[:])); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for {
		msg, err := d.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Frames) != 3 || len(msg.Frames[0]) != 0 {
			t.Fatalf("replay message of %d frames", len(msg.Frames))
		}
		seq := int64(binary.BigEndian.Uint64(msg.Frames[1]))
		if seq == -1 {
			return seqs
		}
		if _, err := kvevents.DecodeBatch(msg.Frames[2]); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
}

func TestKVEventsNumberFromZeroAfterACrash(t *testing.T) {
	s := startSim(t, Config{KVEvents: kvConfig()})
	c := newClient(t)
	ch := subscribeKV(t, s, "")
	untilSubscribed(t, s, c, ch)
	s.Crash()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted process's publisher has a new socket: subscribe again.
	ch = subscribeKV(t, s, "")
	if m := untilSubscribed(t, s, c, ch); m.seq > 5 {
		t.Fatalf("first batch after a restart has seq %d, want one counted from 0", m.seq)
	}
}

func TestKVEventsConfigIsVLLMs(t *testing.T) {
	for _, bad := range []string{`{"enable_kv_cache_events": true, "endpont": "tcp://*:5557"}`, `not json`} {
		if _, err := ParseKVEventsConfig(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
	c, err := ParseKVEventsConfig(`{"enable_kv_cache_events": true, "publisher": "kafka"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Config{KVEvents: c}); err == nil || !strings.Contains(err.Error(), "kafka") {
		t.Fatalf("Start with publisher kafka: %v", err)
	}
	c, _ = ParseKVEventsConfig(`{}`)
	if c.Endpoint != "tcp://*:5557" || c.BufferSteps != 10000 || c.Topic != "" {
		t.Fatalf("defaults %+v, want vLLM's", c)
	}
	if on, _ := c.publishing(); on {
		t.Fatal("publishing without enable_kv_cache_events")
	}
}
