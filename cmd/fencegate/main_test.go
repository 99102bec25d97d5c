package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The README's first command: the demo starts a gateway and three replicas that answer.
func TestDemoServesACompletion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--replica-base-port", "0", "--decode-per-token", "0s"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var url string
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate gateway listening on "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatalf("the demo never said where it listens: %v", <-done)
	}
	go io.Copy(io.Discard, pr)
	c := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     "sim-model",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		MaxTokens: openai.Int(6),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content == "" || resp.Choices[0].FinishReason == "" {
		t.Fatalf("empty answer %+v", resp)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo ended with %v", err)
	}
}

// serve rejects an invalid configuration at start, naming the field.
func TestServeRejectsInvalidConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("models:\n  - name: m\n    replicas: [{url: 'nope'}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"serve", "--config", path}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "models[0].replicas[0].url") {
		t.Fatalf("error %v does not name the field", err)
	}
	if err := run(context.Background(), []string{"bogus"}, io.Discard, io.Discard); err == nil {
		t.Fatal("an unknown command must fail")
	}
}
