package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
