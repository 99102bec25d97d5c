package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// namedEvent is one SSE event with an "event:" line, as the Messages and
// Responses endpoints send them.
type namedEvent struct {
	name string
	data string
}

// readNamedEvent reads the next event of an SSE body whose events have
// "event:" lines, skipping comment lines. It returns io.EOF after the last
// whole event; an event cut off by the end of the body is an error.
func readNamedEvent(br *bufio.Reader) (namedEvent, error) {
	var ev namedEvent
	started := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && (started || line != "") {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if started {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.name, started = line[len("event: "):], true
		case strings.HasPrefix(line, "data: "):
			if ev.data != "" {
				ev.data += "\n"
			}
			ev.data, started = ev.data+line[len("data: "):], true
		default:
			return ev, errors.New("unexpected SSE line " + line)
		}
	}
}

// loadNamedSSEFixture returns the events of a testdata .sse file of named
// events.
func loadNamedSSEFixture(t *testing.T, name string) []namedEvent {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var events []namedEvent
	for {
		ev, err := readNamedEvent(br)
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		events = append(events, ev)
	}
}

// namedObservation is everything a client saw of one request to an
// endpoint with named events.
type namedObservation struct {
	status int
	header http.Header
	body   []byte       // the whole body when status is not 200 or the reply is not a stream
	events []namedEvent // in order
	err    error        // from Do or from reading the body; nil on a clean end
}

// observeNamed runs one request and reads its events until the body ends.
// When progress is not nil it receives the number of events seen after
// the headers arrive and after every event.
func observeNamed(ctx context.Context, c *http.Client, req *http.Request, progress chan<- int) namedObservation {
	var o namedObservation
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		o.err = err
		return o
	}
	defer resp.Body.Close()
	o.status, o.header = resp.StatusCode, resp.Header
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		o.body, o.err = io.ReadAll(resp.Body)
		return o
	}
	if progress != nil {
		progress <- 0
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		ev, err := readNamedEvent(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				o.err = err
			}
			return o
		}
		o.events = append(o.events, ev)
		if progress != nil {
			progress <- len(o.events)
		}
	}
}

// names lists the events' names.
func (o namedObservation) names() []string {
	out := make([]string, len(o.events))
	for i, ev := range o.events {
		out[i] = ev.name
	}
	return out
}

// compareNamedStream checks a sim stream against a vLLM fixture event by
// event: the same event names in the same order, and data of the same
// shape, with equal values at valueKeys.
func compareNamedStream(t *testing.T, fixture string, got []namedEvent, valueKeys map[string]bool) {
	t.Helper()
	want := loadNamedSSEFixture(t, fixture)
	if len(got) != len(want) {
		gotNames := make([]string, len(got))
		for i, ev := range got {
			gotNames[i] = ev.name
		}
		wantNames := make([]string, len(want))
		for i, ev := range want {
			wantNames[i] = ev.name
		}
		t.Fatalf("%s: the sim sent %d events, vLLM %d:\nsim:  %q\nvLLM: %q", fixture, len(got), len(want), gotNames, wantNames)
	}
	for i := range want {
		if got[i].name != want[i].name {
			t.Errorf("%s event %d: sim event %q, vLLM %q", fixture, i, got[i].name, want[i].name)
		}
		for _, d := range shapeDiffValues("$", decodeEvent(t, got[i].data), decodeEvent(t, want[i].data), valueKeys) {
			t.Errorf("%s event %d (%s): %s\nsim:  %s\nvLLM: %s", fixture, i, want[i].name, d, got[i].data, want[i].data)
		}
	}
}

// compareBodyValues is compareBody with values that must be equal.
func compareBodyValues(t *testing.T, fixture string, got []byte, valueKeys map[string]bool) {
	t.Helper()
	var sim any
	if err := json.Unmarshal(got, &sim); err != nil {
		t.Fatalf("sim body %s: %v", got, err)
	}
	for _, d := range shapeDiffValues("$", sim, loadJSONFixture(t, fixture), valueKeys) {
		t.Errorf("%s: %s\nsim: %s", fixture, d, got)
	}
}

// keys makes a value-key set.
func keys(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// isHex32 reports whether s is 32 lowercase hex digits, a uuid4's hex.
func isHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func TestReadNamedEvent(t *testing.T) {
	br := bufio.NewReader(strings.NewReader(": c\nevent: a\ndata: {}\n\nevent: b\ndata: 1\n\nevent: c\ndata: {\"x"))
	var got []namedEvent
	var err error
	for {
		var ev namedEvent
		if ev, err = readNamedEvent(br); err != nil {
			break
		}
		got = append(got, ev)
	}
	if len(got) != 2 || got[0] != (namedEvent{"a", "{}"}) || got[1] != (namedEvent{"b", "1"}) {
		t.Errorf("events = %q", got)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut-off event gave %v, want io.ErrUnexpectedEOF", err)
	}
}
