package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
)

// embeddingsReply decodes an embeddings reply; embedding is a float list or
// a base64 string.
type embeddingsReply struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Index     int             `json:"index"`
		Object    string          `json:"object"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		TotalTokens      int `json:"total_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func postEmbeddings(t *testing.T, s *Server, body any, header map[string]string) (int, []byte) {
	t.Helper()
	return postJSON(t, newClient(t), s.URL()+"/v1/embeddings", jsonBody(t, body), header)
}

var embeddingValueKeys = keys("object", "index")

func TestEmbeddingsMatchVLLM(t *testing.T) {
	s := startSim(t, Config{Task: TaskEmbed, EmbeddingDim: 4, Name: "embedder"})
	status, body := postEmbeddings(t, s, map[string]any{"model": "sim-model", "input": []string{"Hello there", "a b c d e"}}, nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	compareBodyValues(t, "vllm_embeddings.json", body, embeddingValueKeys)
	var r embeddingsReply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID, "embd-") || !isHex32(r.ID[len("embd-"):]) || r.Usage.PromptTokens != 7 || r.Usage.TotalTokens != 7 || r.Usage.CompletionTokens != 0 {
		t.Errorf("id %q, usage %+v", r.ID, r.Usage)
	}
	for i, input := range []string{"Hello there", "a b c d e"} {
		var got []float64
		if err := json.Unmarshal(r.Data[i].Embedding, &got); err != nil {
			t.Fatal(err)
		}
		want := Embedding("embedder", input, 4)
		norm := 0.0
		for j := range want {
			// vLLM's float32 values, widened as Python prints them.
			if got[j] != float64(want[j]) {
				t.Errorf("input %d dim %d: %v, want %v", i, j, got[j], float64(want[j]))
			}
			norm += got[j] * got[j]
		}
		if math.Abs(norm-1) > 1e-6 {
			t.Errorf("input %d: |v|² = %v, want unit length", i, norm)
		}
	}
	rec := s.Records()[0]
	if rec.Endpoint != "embeddings" || rec.ID != r.ID || rec.PromptTokens != 7 || rec.Choices != 2 || rec.Outcome != OutcomeFinished || rec.Stream {
		t.Errorf("record = %+v", rec)
	}
	// Deterministic: the same input gives the same vector, another replica
	// another one, as replicas' texts differ.
	if a, b := Embedding("embedder", "x", 8), Embedding("embedder", "x", 8); a[3] != b[3] {
		t.Error("vectors differ between calls")
	}
	if a, b := Embedding("embedder", "x", 8), Embedding("other", "x", 8); a[3] == b[3] {
		t.Error("two replicas gave the same vector")
	}
}

func TestEmbeddingsBase64(t *testing.T) {
	s := startSim(t, Config{Task: TaskEmbed, EmbeddingDim: 4})
	for _, c := range []struct {
		endianness string
		order      binary.ByteOrder
	}{{"", binary.LittleEndian}, {"big", binary.BigEndian}, {"little", binary.LittleEndian}} {
		req := map[string]any{"input": "one two", "encoding_format": "base64"}
		if c.endianness != "" {
			req["endianness"] = c.endianness
		}
		status, body := postEmbeddings(t, s, req, nil)
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		compareBodyValues(t, "vllm_embeddings_base64.json", body, embeddingValueKeys)
		var r embeddingsReply
		_ = json.Unmarshal(body, &r)
		var encoded string
		_ = json.Unmarshal(r.Data[0].Embedding, &encoded)
		raw, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil || len(raw) != 16 {
			t.Fatalf("base64 %q: %v", encoded, err)
		}
		want := Embedding("sim", "one two", 4)
		for j := range want {
			if got := math.Float32frombits(c.order.Uint32(raw[4*j:])); got != want[j] {
				t.Errorf("%q dim %d: %v, want %v", c.endianness, j, got, want[j])
			}
		}
	}
}

func TestEmbeddingsInputs(t *testing.T) {
	s := startSim(t, Config{Task: TaskEmbed, EmbeddingDim: 3})
	for _, c := range []struct {
		input  any
		keys   []string
		tokens int
	}{
		{[]int{101, 102, 103}, []string{TokenPrompt([]int{101, 102, 103})}, 3},
		{[][]int{{101}, {102, 103}}, []string{TokenPrompt([]int{101}), TokenPrompt([]int{102, 103})}, 3},
		{"solo", []string{"solo"}, 1},
	} {
		status, body := postEmbeddings(t, s, map[string]any{"input": c.input}, nil)
		var r embeddingsReply
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || len(r.Data) != len(c.keys) || r.Usage.PromptTokens != c.tokens {
			t.Fatalf("%v: %d %s", c.input, status, body)
		}
		for i, key := range c.keys {
			var got []float64
			_ = json.Unmarshal(r.Data[i].Embedding, &got)
			if want := Embedding("sim", key, 3); got[0] != float64(want[0]) || r.Data[i].Index != i {
				t.Errorf("%v input %d: %v, want %v", c.input, i, got, want)
			}
		}
	}
	// An embedding chat renders without the generation prompt.
	status, body := postEmbeddings(t, s, map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}}, nil)
	var r embeddingsReply
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Usage.PromptTokens != 4 {
		t.Errorf("chat input: %d %s", status, body)
	}
}

func TestEmbeddingsErrors(t *testing.T) {
	s := startSim(t, Config{Task: TaskEmbed, MaxModelLen: 8})
	for _, c := range []struct {
		name, body string
		status     int
		typ, msg   string
	}{
		{"no input", `{"model":"sim-model"}`, 400, "Bad Request", "2 validation errors:\n  {'type': 'missing', 'loc': ('body', 'EmbeddingCompletionRequest', 'input')"},
		{"unknown model", `{"model":"e5","input":"x"}`, 404, "NotFoundError", "The model `e5` does not exist."},
		{"dimensions", `{"input":"x","dimensions":2}`, 400, "BadRequestError", `Model "sim-model" does not support matryoshka representation`},
		{"too long", `{"input":"` + strings.Repeat("w ", 9) + `"}`, 400, "BadRequestError", "This model's maximum context length is 8 tokens. However, you requested 9 tokens in the input for embedding generation."},
		{"empty", `{"input":""}`, 400, "BadRequestError", "The decoder prompt cannot be empty"},
		{"bad format", `{"input":"x","encoding_format":"hex"}`, 400, "Bad Request", "Input should be 'float', 'base64', 'bytes' or 'bytes_only'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := postJSON(t, newClient(t), s.URL()+"/v1/embeddings", []byte(c.body), nil)
			e := decodeError(t, body)
			if status != c.status || e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.msg) {
				t.Errorf("%d %s", status, body)
			}
		})
	}
}

// TestRoutesFollowTheTask: vLLM registers only the routes of the model's
// tasks; the others are FastAPI's 404.
func TestRoutesFollowTheTask(t *testing.T) {
	gen := startSim(t, Config{})
	emb := startSim(t, Config{Task: TaskEmbed})
	notFound := func(s *Server, path string, body any) {
		t.Helper()
		status, b := postJSON(t, newClient(t), s.URL()+path, jsonBody(t, body), nil)
		if status != http.StatusNotFound || string(b) != `{"detail":"Not Found"}` {
			t.Errorf("%s: %d %s", path, status, b)
		}
	}
	notFound(gen, "/v1/embeddings", map[string]any{"input": "x"})
	notFound(emb, "/v1/chat/completions", chatRequest("x", nil))
	notFound(emb, "/v1/completions", map[string]any{"model": "sim-model", "prompt": "x"})
	notFound(emb, "/v1/messages", messagesRequest("x", 3, nil))
	notFound(emb, "/v1/responses", map[string]any{"input": "x"})
	if status, _ := getBody(t, newClient(t), emb.URL()+"/v1/models"); status != http.StatusOK {
		t.Errorf("/v1/models on an embedding replica: %d", status)
	}
	if len(gen.Records())+len(emb.Records()) != 0 {
		t.Errorf("unrouted requests made records")
	}
}

func TestEmbeddingsFaults(t *testing.T) {
	for _, c := range []struct {
		spec    string
		status  int
		outcome string
	}{
		{"status:503@accept", 503, OutcomeError},
		{"error@prefill", 500, OutcomeError},
		// An embedding has no output tokens: these never fire.
		{"crash@computed:0,reset@sent:0", 200, OutcomeFinished},
	} {
		t.Run(c.spec, func(t *testing.T) {
			s := startSim(t, Config{Task: TaskEmbed})
			status, body := postEmbeddings(t, s, map[string]any{"input": []string{"a", "b"}}, map[string]string{"X-Sim-Fault": c.spec})
			if status != c.status {
				t.Errorf("%d %s", status, body)
			}
			if c.status != 200 {
				decodeError(t, body)
			}
			if rec := s.Records()[0]; rec.Outcome != c.outcome || rec.Fault != c.spec || rec.Choices != 2 {
				t.Errorf("record = %+v", rec)
			}
		})
	}
	t.Run("crash@prefill", func(t *testing.T) {
		s := startSim(t, Config{Task: TaskEmbed})
		_, err := newClient(t).Do(newPost(t, testContext(t), s.URL()+"/v1/embeddings", jsonBody(t, map[string]any{"input": "a"}), map[string]string{"X-Sim-Fault": "crash@prefill"}))
		if !isReset(err) {
			t.Errorf("client error %v, want a reset", err)
		}
		if rec := s.Records()[0]; rec.Outcome != OutcomeCrashed {
			t.Errorf("record = %+v", rec)
		}
	})
	t.Run("garbage@prefill", func(t *testing.T) {
		s := startSim(t, Config{Task: TaskEmbed})
		ctx, cancel := contextWithCancel(t)
		resp, err := newClient(t).Do(newPost(t, ctx, s.URL()+"/v1/embeddings", jsonBody(t, map[string]any{"input": "a"}), map[string]string{"X-Sim-Fault": "garbage@prefill"}))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		n, _ := resp.Body.Read(buf)
		cancel()
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(buf[:n]), `{"id":"embd-`) {
			t.Errorf("%d %q", resp.StatusCode, buf[:n])
		}
		if rec := waitRecord(t, s, ended); rec.Outcome != OutcomeGarbage {
			t.Errorf("record = %+v", rec)
		}
	})
}
