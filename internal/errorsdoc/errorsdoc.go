// Package errorsdoc reads the error tables of docs/errors.md, so that tests hold the
// gateway's answers to what that document says: each code's x-should-retry. It is
// imported by tests only.
package errorsdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// Event is the x-should-retry of a code that only ever comes as an event in a stream,
// which has no header of its own.
const Event = "—"

// Stance is one code's x-should-retry in the document: "true", "false" or Event, and the
// table row that says so.
type Stance struct {
	Value string
	Row   string
}

var (
	backticked    = regexp.MustCompile("`([^`]+)`")
	codeWord      = regexp.MustCompile(`^[a-z][a-z_]*[a-z]$`)
	parenthesised = regexp.MustCompile(`\([^)]*\)`)
)

// Path is docs/errors.md of the repository this package is in.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs", "errors.md")
}

// Stances reads every table of docs/errors.md that has an x-should-retry column: the
// codes of each row's first cell (those in parentheses qualify the row and are skipped)
// and the first value of its x-should-retry cell. A code given two values is an error.
func Stances() (map[string]Stance, error) {
	b, err := os.ReadFile(Path())
	if err != nil {
		return nil, fmt.Errorf("read the error codes document: %w", err)
	}
	out := map[string]Stance{}
	col := -1
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			col = -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "code" {
			col = -1
			for i, c := range cells {
				if c == "x-should-retry" {
					col = i
				}
			}
			continue
		}
		if col < 0 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		if len(cells) <= col {
			return nil, fmt.Errorf("docs/errors.md: a row without an x-should-retry cell: %s", line)
		}
		value := Event
		if m := backticked.FindStringSubmatch(cells[col]); m != nil {
			value = m[1]
		} else if !strings.HasPrefix(cells[col], Event) {
			return nil, fmt.Errorf("docs/errors.md: x-should-retry %q is neither `true`, `false` nor %s: %s", cells[col], Event, line)
		}
		if value != "true" && value != "false" && value != Event {
			return nil, fmt.Errorf("docs/errors.md: x-should-retry %q: %s", value, line)
		}
		for _, m := range backticked.FindAllStringSubmatch(parenthesised.ReplaceAllString(cells[0], ""), -1) {
			code := m[1]
			if !codeWord.MatchString(code) {
				continue
			}
			if prev, ok := out[code]; ok && prev.Value != value {
				return nil, fmt.Errorf("docs/errors.md: %s is %s in one row and %s in another:\n%s\n%s", code, prev.Value, value, prev.Row, line)
			}
			out[code] = Stance{Value: value, Row: line}
		}
	}
	return out, nil
}
