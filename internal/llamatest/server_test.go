package llamatest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	return resp.StatusCode
}

type chatAnswer struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// The real engine loads the model and answers exactly max_tokens words, the ones the model
// predicts: after the chat template's last byte (":" of "assistant:") comes Next of that
// byte's token, then the chain of successors. Sampling at any temperature gives the same
// answer, and the end-of-sequence token never cuts it short. A text completion continues
// from the prompt's last byte.
func TestServerAnswersPlainWords(t *testing.T) {
	s := Start(t, 1, Options{Seed: 5})[0]
	want := NewModel(5).ChatReply(40)
	for _, temp := range []float64{0, 0.8, 2} {
		var a chatAnswer
		code := post(t, s.URL+"/v1/chat/completions", map[string]any{
			"model": ModelName, "max_tokens": 40, "temperature": temp,
			"messages": []map[string]string{{"role": "user", "content": "say something"}},
		}, &a)
		if code != 200 || len(a.Choices) != 1 {
			t.Fatalf("status %d, %+v", code, a)
		}
		c := a.Choices[0]
		if c.Message.Content != want || c.FinishReason != "length" || a.Usage.CompletionTokens != 40 {
			t.Fatalf("temperature %v: %q (%s, %d tokens), want %q", temp, c.Message.Content, c.FinishReason, a.Usage.CompletionTokens, want)
		}
	}
	if got := len(strings.Fields(want)); got != 40 {
		t.Fatalf("%d words", got)
	}
	var c struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if code := post(t, s.URL+"/v1/completions", map[string]any{"model": ModelName, "max_tokens": 7, "prompt": "once upon a time"}, &c); code != 200 {
		t.Fatalf("status %d", code)
	}
	if want := NewModel(5).Completion("once upon a time", 7); c.Choices[0].Text != want || c.Choices[0].FinishReason != "length" {
		t.Fatalf("completion %+v, want %q", c, want)
	}
}

// Start gives every server its own port, the slots asked for, and the metrics and slots
// endpoints; Kill leaves a refused port behind.
func TestStartAndKill(t *testing.T) {
	servers := Start(t, 2, Options{Parallel: 2, CtxPerSlot: 512})
	if servers[0].URL == servers[1].URL {
		t.Fatal("two servers on one port")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slots, err := servers[0].Slots(ctx)
	if err != nil || len(slots) != 2 || slots[0].NCtx != 512 {
		t.Fatalf("slots %+v %v", slots, err)
	}
	metrics, err := servers[1].Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:tokens_predicted_total"} {
		if _, ok := metrics[name]; !ok {
			t.Errorf("no %s in %v", name, metrics)
		}
	}
	servers[0].Kill()
	if !servers[0].Exited() {
		t.Fatal("still running")
	}
	if _, err := http.Get(servers[0].URL + "/health"); err == nil {
		t.Fatal("a killed server answered")
	}
	resp, err := http.Get(servers[1].URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the other server: %d", resp.StatusCode)
	}
}
