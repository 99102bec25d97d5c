package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	var b bytes.Buffer
	l, err := New("", &b)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "request_id", "req_1")
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil || line["request_id"] != "req_1" || line["msg"] != "hello" {
		t.Fatalf("json line %q: %v", b.String(), err)
	}
	b.Reset()
	l, _ = New(Text, &b)
	l.Info("hello")
	if !strings.Contains(b.String(), "msg=hello") {
		t.Fatalf("text line %q", b.String())
	}
	if _, err := New("xml", &b); err == nil {
		t.Fatal("an unknown format must be refused")
	}
}
