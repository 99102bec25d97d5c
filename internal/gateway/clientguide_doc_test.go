package gateway_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// updateGuide rewrites the snippets of docs/clients.md from the code they come from:
// go test ./internal/gateway -run TestClientGuideSnippets -update-guide
var updateGuide = flag.Bool("update-guide", false, "rewrite the snippets of docs/clients.md from the tested code")

// guideSources are the files whose guide:begin regions are the snippets of docs/clients.md.
var guideSources = []string{"internal/gateway/clientguide_test.go", "internal/gateway/testdata/sdkclients/guide.mjs"}

// snippetBlock is a snippet marker of docs/clients.md and the fenced block after it.
var snippetBlock = regexp.MustCompile("(?m)^<!-- snippet: ([^#]+)#([a-z0-9-]+) -->\n```([a-z]*)\n((?s:.*?))```\n")

// guideRegions reads the guide:begin NAME ... guide:end regions of a source file.
func guideRegions(t *testing.T, root, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	regions := map[string]string{}
	var name string
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "// guide:begin "):
			name, lines = strings.TrimPrefix(line, "// guide:begin "), nil
		case line == "// guide:end" && name != "":
			regions[name] = strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n"
			name = ""
		case name != "":
			lines = append(lines, line)
		}
	}
	if name != "" {
		t.Fatalf("%s: guide:begin %s has no guide:end", path, name)
	}
	return regions
}

// Every snippet of docs/clients.md is the code the guide's tests run, and every region of
// that code is in the document: neither can change without the other.
func TestClientGuideSnippets(t *testing.T) {
	root := filepath.Join("..", "..")
	docPath := filepath.Join(root, "docs", "clients.md")
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	regions := map[string]string{}
	for _, src := range guideSources {
		for name, code := range guideRegions(t, root, src) {
			regions[src+"#"+name] = code
		}
	}
	used := map[string]bool{}
	updated := snippetBlock.ReplaceAllStringFunc(string(doc), func(block string) string {
		m := snippetBlock.FindStringSubmatch(block)
		key := m[1] + "#" + m[2]
		code, ok := regions[key]
		used[key] = true
		switch {
		case !ok:
			t.Errorf("docs/clients.md shows %s, which is no guide region", key)
		case m[4] != code && !*updateGuide:
			t.Errorf("docs/clients.md's snippet %s differs from the code the tests run (go test ./internal/gateway -run TestClientGuideSnippets -update-guide rewrites it):\n--- doc\n%s--- code\n%s", key, m[4], code)
		}
		if !ok {
			return block
		}
		return fmt.Sprintf("<!-- snippet: %s#%s -->\n```%s\n%s```\n", m[1], m[2], m[3], code)
	})
	for key := range regions {
		if !used[key] {
			t.Errorf("the guide region %s is not in docs/clients.md", key)
		}
	}
	if *updateGuide && updated != string(doc) {
		if err := os.WriteFile(docPath, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("docs/clients.md rewritten")
	}
	if len(used) < 10 {
		t.Fatalf("only %d snippets found in docs/clients.md", len(used))
	}
}
