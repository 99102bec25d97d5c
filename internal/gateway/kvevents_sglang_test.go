package gateway_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fencegate/fencegate/internal/config"
)

// sglangKV is the kv_events of replica sglang-1 in /readyz at admin (nil: none yet).
func sglangKV(t *testing.T, admin string) map[string]any {
	t.Helper()
	kv, _ := readyzReplicas(t, admin)["sglang-1"]["kv_events"].(map[string]any)
	return kv
}

// An SGLang replica's KV events — its radix cache's pages as its releases publish them
// (testdata/README.md of internal/kvevents: a page a token, a node split published as the
// node's removal and its halves stored again, the medium on later releases) — are read
// as vLLM's are: the replica is live, and the blocks its engine holds are counted through
// the split, on the GPU tier only, and emptied by AllBlocksCleared.
func TestKVEventsOfAnSGLangEngine(t *testing.T) {
	payload := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "kvevents", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tp := newTestPublisher(t, true)
	engine := fakeEngine(t, map[string][]byte{"/server_info": recorded(t, "sglang_server_info.txt"),
		"/v1/models": []byte(`{"object":"list","data":[{"id":"qwen2.5-7b","object":"model","owned_by":"sglang","root":"qwen2.5-7b"}]}`)})
	admin := adminOver(t, "qwen2.5-7b", []config.Replica{{Name: "sglang-1", URL: engine, Engine: "sglang",
		KVEvents: &config.KVEvents{Endpoint: tp.endpoint, ReplayEndpoint: tp.replayAt, Topic: "kv"}}})

	batches := []string{"batch_sglang_store.msgpack", "batch_sglang_split.msgpack", "batch_sglang_medium.msgpack"}
	for seq, name := range batches {
		tp.keep(int64(seq), payload(name))
	}
	// The first batch until the subscription has it (a PUB socket drops what it sends before
	// a subscriber's subscription reached it); the rest follow it, or come by the replay.
	wantBlocks := []int{6, 8, 0} // six pages; six removed, six again and two new; two new, one removed, all cleared
	for seq := range batches {
		var kv map[string]any
		for i := 0; ; i++ {
			if seq == 0 || i%40 == 0 {
				tp.publish(int64(seq))
			}
			kv = sglangKV(t, admin)
			if kv != nil && kv["last_seq"] != nil && int(kv["last_seq"].(float64)) >= seq {
				break
			}
			if i == 400 {
				t.Fatalf("batch %d never applied: %v", seq, kv)
			}
			<-time.After(25 * time.Millisecond)
		}
		if kv["state"] != "live" || int(kv["engine_blocks"].(float64)) != wantBlocks[seq] {
			t.Fatalf("after %s: %v; want live with %d engine blocks", batches[seq], kv, wantBlocks[seq])
		}
	}
}

// keep keeps payload as batch seq, for publish and for the replay.
func (tp *testPublisher) keep(seq int64, payload []byte) {
	tp.mu <- struct{}{}
	tp.kept[seq] = payload
	<-tp.mu
}

// publish sends the kept batch seq on the PUB socket.
func (tp *testPublisher) publish(seq int64) {
	tp.mu <- struct{}{}
	payload := tp.kept[seq]
	<-tp.mu
	if err := tp.pub.Send(zmq4.NewMsgFrom([]byte("kv"), seqBytes(seq), payload)); err != nil {
		tp.t.Fatal(err)
	}
}
