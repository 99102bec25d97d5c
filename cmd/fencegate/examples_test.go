package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file, info, text string
	line             int
}

// docBlocks returns the fenced code blocks of the repository's Markdown documents.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../CONTRIBUTING.md")
	var out []docBlock
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur *docBlock
		var text strings.Builder
		indent := ""
		for i, line := range strings.Split(string(b), "\n") {
			trimmed := strings.TrimSpace(line)
			switch {
			case cur == nil && strings.HasPrefix(trimmed, "```"):
				cur = &docBlock{file: filepath.Base(f), info: strings.TrimPrefix(trimmed, "```"), line: i + 1}
				text.Reset()
				// A block inside a list item is indented like its fence.
				indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			case cur != nil && trimmed == "```":
				cur.text = text.String()
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				text.WriteString(strings.TrimPrefix(line, indent) + "\n")
			}
		}
	}
	return out
}

// placeholder matches the placeholders of the examples, <LIKE_THIS>.
var placeholder = regexp.MustCompile(`<([A-Z][A-Z0-9_]*)>`)

// examplePlaceholders are the values the test supplies for the examples' placeholders: files
// that exist and hold a secret, and key digests.
func examplePlaceholders(t *testing.T) map[string]string {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	newTestCert(t, "examples").write(t, cert, key)
	digest := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	return map[string]string{
		"ENGINE_KEY_FILE":   write("engine.key", "an-engine-api-key\n"),
		"AGENT_SECRET_FILE": write("agent.secret", "a-shared-agent-secret\n"),
		"TLS_CERT_FILE":     cert,
		"TLS_KEY_FILE":      key,
		"TEAM_A_KEY_SHA256": digest("team-a"),
		"TEAM_B_KEY_SHA256": digest("team-b"),
		"OPS_KEY_SHA256":    digest("ops"),
	}
}

// exampleBase is what a fragment (an example without models) is added to: a pool of two
// replicas.
const exampleBase = `models:
  - name: m
    replicas: [{url: "http://10.0.0.11:8000"}, {url: "http://10.0.0.12:8000"}]
`

// Every YAML example of the README and docs/ is a configuration that fencegate check
// accepts as written, its placeholders filled; one without models is a fragment, checked
// added to a small configuration. A YAML block that is no fencegate configuration says so
// with a second word after yaml (```yaml prometheus).
func TestEveryConfigurationExamplePassesCheck(t *testing.T) {
	values := examplePlaceholders(t)
	perFile := map[string]int{}
	for _, b := range docBlocks(t) {
		if b.info != "yaml" {
			continue
		}
		where := fmt.Sprintf("%s:%d", b.file, b.line)
		text := placeholder.ReplaceAllStringFunc(b.text, func(m string) string {
			v, ok := values[strings.Trim(m, "<>")]
			if !ok {
				t.Errorf("%s: placeholder %s is not one the test supplies", where, m)
			}
			return v
		})
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			t.Errorf("%s: not YAML: %v", where, err)
			continue
		}
		if _, full := doc["models"]; !full {
			var base map[string]any
			if err := yaml.Unmarshal([]byte(exampleBase), &base); err != nil {
				t.Fatal(err)
			}
			for k, v := range doc {
				base[k] = v
			}
			merged, err := yaml.Marshal(base)
			if err != nil {
				t.Fatal(err)
			}
			text = string(merged)
		}
		path := filepath.Join(t.TempDir(), "fencegate.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), []string{"check", "--config", path}, &out, &out); err != nil {
			t.Errorf("%s: fencegate check: %v\n%s", where, err, b.text)
		}
		perFile[b.file]++
	}
	// The examples this test exists for: the README's quick start and the reference's.
	if perFile["README.md"] == 0 || perFile["configuration.md"] < 2 {
		t.Fatalf("examples checked per file: %v", perFile)
	}
}
