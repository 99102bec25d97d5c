package chaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/trace"
)

// The wire judge checks a gateway it knows nothing about: a history is the bytes its
// client received and the records of the replicas behind it (GET /sim/requests), never a
// journal, a request id or an error code of fencegate's. Its rules are the client
// contract as any gateway can keep it:
//
//   - one complete answer from one replica (the answer's own end: data: [DONE],
//     message_stop, response.completed; every choice finished as that replica finishes it);
//   - or a prefix of one replica's answer, then one explicit error: an SSE error event or
//     an error object after the output, nothing after it but the stream's end;
//   - or an error before any output: an HTTP error status, or an error event first;
//   - never text that is not one replica's (a splice of two replicas, or a repeat of the
//     same one), never a stream that just ends (a silent end: no end event and no error),
//     never an engine request started after the client had output (a rerun after output);
//   - a client gone means its replica stops decoding (a zombie decodes on), and a client
//     that stops reading holds no replica for long (held);
//   - a tool the engine runs itself runs at most once for the request, as its tool server
//     counts (tool-twice), and once it ran, an error tells the client not to send the
//     request again (tool-error; wire_responses.go).
//
// judgeWire is a pure function of a wireHistory, so its rules are tested on crafted
// histories as well as on runs.

// Rules of the wire judge; a violation names one.
const (
	vSplice           = "splice"             // text that is not one replica's answer: two replicas' output, or another's
	vRepeat           = "repeat"             // the same replica's text again, from an earlier point
	vSilentEnd        = "silent-end"         // the stream ended with neither its end event nor an error, or ended "complete" short of the answer
	vRerunAfterOutput = "rerun-after-output" // an engine request started after the client had received output
	vZombie           = "zombie"             // a replica decoding for a client that left, or after the response ended
	vOverlap          = "overlap"            // two engine requests of one client request ran at once
	vHeld             = "held"               // a client that stopped reading held a replica busy
	vAfterEnd         = "after-end"          // output after the stream's end or its error
)

// wireHistory is one request as the wire judge sees it.
type wireHistory struct {
	path string // the API path (/v1/chat/completions, /v1/completions, /v1/responses)

	// The client's side.
	status      int // 0: no HTTP response at all
	contentType string
	received    trace.Received // every byte of the body, as trace.Recorder keeps it
	transport   error          // a request or read error other than the body's end
	timedOut    bool           // the client gave up: the response neither ended nor failed in time
	sentAt      time.Time
	// firstOutputAt is when the client received its first output-bearing event (zero: none).
	firstOutputAt time.Time
	endedAt       time.Time // when the response ended (or the client left)
	left          bool      // the client closed its connection on purpose, at leftAt
	leftAt        time.Time
	stalled       bool // the client stopped reading on purpose, at stalledAt
	stalledAt     time.Time
	// heldAfterStall are the engine requests still running when the stalled client gave up
	// waiting (stallWait after it stopped reading).
	heldAfterStall []string
	stallWait      time.Duration

	// The replicas' side: this request's engine requests, oldest first, as read at
	// checkedAt, and each replica's own answer to the request.
	records   []replicaRecord
	checkedAt time.Time
	answers   map[string]answer

	// leaveGrace is how long after its client left an engine request may still finish
	// (it had nothing left to decode); overlapGrace how long two engine requests may seem
	// to overlap (an engine notices a closed connection a moment after it closed).
	leaveGrace, overlapGrace time.Duration

	// engineTool: the request declared a tool the engine runs itself. toolCalls are the
	// calls the tool server received for the request, each named by who made it.
	engineTool bool
	toolCalls  []string
}

// replicaRecord is one engine request of a history, with the replica that ran it.
type replicaRecord struct {
	Replica string
	sim.Record
}

// wireVerdict is what became of a request: its ending when the contract was kept
// (complete, rerun, interrupted, error, left, stalled) and every violation.
type wireVerdict struct {
	ending     string
	source     string // the replica whose answer (or a prefix of it) the client received
	tokens     int    // output tokens the client received
	errorBody  json.RawMessage
	violations []violation
}

// Endings of a history that kept the contract.
const (
	endComplete    = "complete"    // one complete answer, from the only engine request
	endRerun       = "rerun"       // one complete answer, after engine requests that failed before output
	endInterrupted = "interrupted" // a prefix of one answer, then one explicit error
	endError       = "error"       // an explicit error before any output
	endLeft        = "left"        // the client left on purpose
	endStalled     = "stalled"     // the client stopped reading on purpose, and read the rest later
)

// wireEvent is one server-sent event as the client received it.
type wireEvent struct {
	name, data string
	text       map[int]string // output text per choice
	finish     map[int]string
	output     bool // carries output: text or a finish
	end        bool // the answer's own end
	err        bool // an error event or error object
}

// readEvent classifies one event of a stream on path.
func readEvent(path, raw string) wireEvent {
	if strings.HasSuffix(path, "/responses") {
		return readResponsesWireEvent(raw)
	}
	t := trace.Read(path, trace.Received{Status: http.StatusOK, ContentType: "text/event-stream", Chunks: []trace.Chunk{{Text: raw}}})
	ev := wireEvent{text: map[int]string{}, finish: t.Finish}
	ev.name, ev.data = sseFields(raw)
	for i, b := range t.Choices {
		if s := b.String(); s != "" {
			ev.text[i] = s
		}
	}
	ev.output = len(ev.text) > 0 || len(ev.finish) > 0
	j := gjson.Parse(ev.data)
	typ := j.Get("type").String()
	switch {
	case ev.data == "[DONE]", ev.name == "message_stop", typ == "message_stop",
		typ == "response.completed", typ == "response.incomplete":
		ev.end = true
	case ev.name == "error", typ == "error", typ == "response.failed", j.Get("object").String() == "error",
		j.Get("error").Exists() && j.Get("error").Type != gjson.Null:
		ev.err, ev.output = true, false
	}
	return ev
}

// wireStream is a whole response read from the wire.
type wireStream struct {
	text      map[int]string // per choice, up to the first end or error
	finish    map[int]string
	ending    string // complete, error or cut
	output    bool   // output before the end or error
	afterEnd  string // the first output-bearing event after the end or the error ("" if none)
	errorBody json.RawMessage
	tokens    int
}

// readWire reads a response: an SSE stream event by event, or a whole body.
func readWire(h *wireHistory) *wireStream {
	ws := &wireStream{text: map[int]string{}, finish: map[int]string{}, ending: "cut"}
	if h.status != http.StatusOK {
		if h.status != 0 {
			ws.ending = "error"
			if body := receivedText(h.received); json.Valid([]byte(body)) {
				ws.errorBody = json.RawMessage(body)
			}
		}
		return ws
	}
	if !strings.Contains(h.contentType, "text/event-stream") {
		body := receivedText(h.received)
		j := gjson.Parse(body)
		switch {
		case !json.Valid([]byte(body)):
		case j.Get("error").Exists() && j.Get("error").Type != gjson.Null:
			ws.ending, ws.errorBody = "error", json.RawMessage(body)
		case strings.HasSuffix(h.path, "/responses"):
			readResponsesWireWhole(body, ws)
			ws.ending, ws.output = "complete", true
		default:
			t := trace.Read(h.path, h.received)
			for i, b := range t.Choices {
				ws.text[i] = b.String()
			}
			ws.finish = t.Finish
			ws.ending, ws.output = "complete", true
		}
		ws.count()
		return ws
	}
	ended := false
	for _, c := range h.received.Chunks {
		if !c.Kept() {
			break // past the recorder's limit; a history's recorder keeps everything
		}
		ev := readEvent(h.path, c.Text)
		if ended {
			if ev.output && ws.afterEnd == "" {
				ws.afterEnd = ev.data
			}
			continue
		}
		switch {
		case ev.end:
			ws.ending, ended = "complete", true
		case ev.err:
			ws.ending, ended = "error", true
			ws.errorBody = json.RawMessage(ev.data)
			if !json.Valid(ws.errorBody) {
				ws.errorBody = nil
			}
		}
		for i, s := range ev.text {
			ws.text[i] += s
		}
		for i, f := range ev.finish {
			ws.finish[i] = f
		}
		ws.output = ws.output || ev.output
	}
	ws.count()
	return ws
}

func (ws *wireStream) count() {
	for _, s := range ws.text {
		ws.tokens += words(s)
	}
}

// receivedText is everything kept of a body.
func receivedText(r trace.Received) string {
	var b strings.Builder
	for _, c := range r.Chunks {
		b.WriteString(c.Text)
	}
	return b.String()
}

// judgeWire checks one history against the contract, from the wire and the replicas'
// records alone.
func judgeWire(h *wireHistory) wireVerdict {
	var v wireVerdict
	fail := func(rule, format string, args ...any) {
		v.violations = append(v.violations, violation{rule, fmt.Sprintf(format, args...)})
	}
	ws := readWire(h)
	v.tokens, v.errorBody = ws.tokens, ws.errorBody

	// The text: a prefix of one replica's answer, in every choice.
	source, rule, why := sourceOf(ws.text, h.answers)
	v.source = source
	if rule != "" {
		fail(rule, "%s", why)
	}
	if ws.afterEnd != "" {
		fail(vAfterEnd, "output after the stream's %s: %.200q", map[string]string{"complete": "end", "error": "error"}[ws.ending], ws.afterEnd)
	}

	// The ending.
	switch {
	case h.left:
		v.ending = endLeft
	case ws.ending == "complete":
		if rule == "" {
			judgeComplete(ws, source, h.answers[source], fail)
		}
		v.ending = endComplete
		if len(h.records) > 1 {
			v.ending = endRerun
		}
	case ws.ending == "error" && ws.output:
		v.ending = endInterrupted
	case ws.ending == "error":
		v.ending = endError
	case h.stalled:
		// A client that stopped reading cannot be told anything once the gateway gives up
		// on it: a cut is its end.
		v.ending = endStalled
	default:
		switch {
		case h.timedOut:
			fail(vSilentEnd, "the response neither ended nor failed within the client's timeout, after %d tokens", ws.tokens)
		case h.status == 0:
			fail(vSilentEnd, "no HTTP response at all (%v)", h.transport)
		case h.transport != nil:
			fail(vSilentEnd, "the stream broke off after %d tokens with no error event (%v)", ws.tokens, h.transport)
		default:
			fail(vSilentEnd, "the stream ended after %d tokens with neither its end nor an error event", ws.tokens)
		}
	}
	if h.stalled && v.ending != endLeft {
		v.ending = endStalled
	}

	judgeRecords(h, fail)
	judgeWireTools(h, ws, fail)
	return v
}

// judgeComplete: a stream that ended as complete carries the whole answer of its replica,
// every choice finished as that replica finishes it.
func judgeComplete(ws *wireStream, source string, ans answer, fail failFunc) {
	if source == "" {
		fail(vSilentEnd, "the stream ended complete with no output at all")
		return
	}
	for k, want := range ans.choices {
		got := ws.text[k]
		if got != want.text+want.toolArgs {
			fail(vSilentEnd, "the stream ended complete after %d of %s's %d tokens in choice %d (a cut answer passed off as whole)",
				words(got), source, words(want.text), k)
			continue
		}
		if f := ws.finish[k]; f == "" {
			fail(vSilentEnd, "the stream ended complete, but choice %d never finished", k)
		} else if want.finish != "" && f != want.finish {
			fail(vSilentEnd, "choice %d finished %q, %s finishes it %q", k, f, source, want.finish)
		}
	}
}

// sourceOf finds the replica whose answer every choice of text is a prefix of ("" for no
// text). When there is none it names the rule broken: a repeat (the text goes back to an
// earlier point of the answer it started as) or a splice (it goes on as another answer,
// or as no replica's).
func sourceOf(text map[int]string, answers map[string]answer) (source, rule, why string) {
	empty := true
	for _, s := range text {
		empty = empty && s == ""
	}
	if empty {
		return "", "", ""
	}
	names := make([]string, 0, len(answers))
	for name := range answers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if prefixOfAll(text, answers[name]) {
			return name, "", ""
		}
	}
	// The choice that leaves every answer, and the answer it follows longest.
	choices := make([]int, 0, len(text))
	for k := range text {
		choices = append(choices, k)
	}
	sort.Ints(choices)
	for _, k := range choices {
		got := text[k]
		best, bestLen := "", -1
		for _, name := range names {
			if n := tokenPrefix(got, choiceText(answers[name], k)); n > bestLen {
				best, bestLen = name, n
			}
		}
		if best == "" {
			return "", vSplice, fmt.Sprintf("choice %d got %q, and no replica answers it", k, clip(got))
		}
		want := choiceText(answers[best], k)
		if strings.HasPrefix(want, got) {
			continue
		}
		rest := got[bestLen:]
		for _, other := range names {
			if other == best {
				continue
			}
			if j := tokenIndex(choiceText(answers[other], k), rest); j >= 0 {
				return "", vSplice, fmt.Sprintf("choice %d: %d tokens of %s's answer, then %s's from its token %d: %q",
					k, words(got[:bestLen]), best, other, words(choiceText(answers[other], k)[:j]), clip(got))
			}
		}
		if j := tokenIndex(want, rest); j >= 0 && j < bestLen {
			return "", vRepeat, fmt.Sprintf("choice %d: %d tokens of %s's answer, then the same answer again from its token %d: %q",
				k, words(got[:bestLen]), best, words(want[:j]), clip(got))
		}
		return "", vSplice, fmt.Sprintf("choice %d: %d tokens of %s's answer, then text no replica answers: %q", k, words(got[:bestLen]), best, clip(got))
	}
	return "", vSplice, "the choices are prefixes of different replicas' answers"
}

func choiceText(a answer, k int) string {
	if k < 0 || k >= len(a.choices) {
		return ""
	}
	return a.choices[k].text + a.choices[k].toolArgs
}

func prefixOfAll(text map[int]string, a answer) bool {
	for k, s := range text {
		if !strings.HasPrefix(choiceText(a, k), s) {
			return false
		}
	}
	return true
}

// tokenPrefix is the length of the longest common prefix of got and want that ends at a
// token boundary of got (each of the sim's tokens starts with a space).
func tokenPrefix(got, want string) int {
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	if n == len(got) || (n < len(got) && got[n] == ' ') {
		return n
	}
	for n > 0 && got[n] != ' ' {
		n--
	}
	return n
}

// tokenIndex is the first token boundary of s from which s goes on as rest (or as much of
// rest as s still has), or -1.
func tokenIndex(s, rest string) int {
	if rest == "" {
		return -1
	}
	for j := 0; j < len(s); j++ {
		if j > 0 && s[j] != ' ' {
			continue
		}
		tail := s[j:]
		if strings.HasPrefix(tail, rest) || (len(tail) < len(rest) && strings.HasPrefix(rest, tail)) {
			return j
		}
	}
	return -1
}

func clip(s string) string {
	if len(s) > 240 {
		return s[:120] + "…" + s[len(s)-100:]
	}
	return s
}

// judgeRecords checks the replicas' records of a history: nothing started after the
// client had output, no two ran at once, and none decoded on for a client that had gone,
// stopped reading, or received its whole response.
func judgeRecords(h *wireHistory, fail failFunc) {
	for i, r := range h.records {
		if !h.firstOutputAt.IsZero() && r.Started.After(h.firstOutputAt) {
			fail(vRerunAfterOutput, "%s started an engine request (%s) %s after the client had received output",
				r.Replica, r.ID, r.Started.Sub(h.firstOutputAt).Round(time.Millisecond))
		}
		for _, p := range h.records[:i] {
			end := p.Ended
			if p.Outcome == "" {
				end = h.checkedAt
			}
			if r.Started.Before(end.Add(-h.overlapGrace)) {
				fail(vOverlap, "%s's engine request started %s before %s's had ended (%s)",
					r.Replica, end.Sub(r.Started).Round(time.Millisecond), p.Replica, outcomeOr(p.Outcome, "still running"))
			}
		}
		running := r.Outcome == ""
		switch {
		case h.left && (running || r.Ended.After(h.leftAt)):
			switch {
			case running:
				fail(vZombie, "%s still decodes %s after the client left (%d tokens computed)",
					r.Replica, h.checkedAt.Sub(h.leftAt).Round(time.Millisecond), r.TokensComputed)
			case r.Outcome == sim.OutcomeFinished && r.Ended.Sub(h.leftAt) > h.leaveGrace:
				fail(vZombie, "%s decoded the whole answer, %s after the client left", r.Replica, r.Ended.Sub(h.leftAt).Round(time.Millisecond))
			}
		case running:
			fail(vZombie, "%s still decodes %s after the response ended (%d tokens computed)",
				r.Replica, h.checkedAt.Sub(h.endedAt).Round(time.Millisecond), r.TokensComputed)
		case !h.left && !h.endedAt.IsZero() && r.Started.After(h.endedAt):
			fail(vZombie, "%s started an engine request %s after the response had ended", r.Replica, r.Started.Sub(h.endedAt).Round(time.Millisecond))
		}
	}
	for _, id := range h.heldAfterStall {
		fail(vHeld, "engine request %s still ran %s after the client stopped reading", id, h.stallWait)
	}
}

func outcomeOr(outcome, none string) string {
	if outcome == "" {
		return none
	}
	return outcome
}

// sseFields returns an SSE event's name (its event: field) and its data (the data: lines
// joined with newlines), as a client's SSE reader sees them.
func sseFields(raw string) (name, data string) {
	var lines []string
	for _, line := range strings.Split(strings.ReplaceAll(raw, "\r\n", "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			lines = append(lines, strings.TrimPrefix(line[len("data:"):], " "))
		}
	}
	return name, strings.Join(lines, "\n")
}
