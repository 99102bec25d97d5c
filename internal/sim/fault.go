package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// A fault spec is "ACTION@POINT", several separated by commas, each with an
// optional ";on=NAME" suffix that restricts it to the replica of that name:
//
//	crash@computed:3
//	slow:x4@prefill,reset@sent:10;on=replica-b
//	error:nodone@sent:2
//	error:hang@sent:4
//
// faultHelp lists the actions and points; their constants below say more.
// parseFaultSpec is the one place that knows the grammar. A fault is armed
// per request by the X-Sim-Fault header, or for the next N requests by
// Server.ArmFault or POST /sim/faults.

// faultHelp is the fault grammar in brief, for `fencegate sim -h`.
const faultHelp = `Faults: X-Sim-Fault request header, or POST /sim/faults {"fault":SPEC,"count":N}.
SPEC is ACTION@POINT[;on=REPLICA], several joined by commas.
ACTION:
  crash          the whole replica dies (connections reset, restarts after --restart-after)
  reset          this connection is reset (TCP RST)
  hang           stop writing, keep the connection open
  status:N       HTTP status N (400..599); after stream headers its error event (then [DONE]
                 with --done-after-stream-error)
  error          vLLM's engine error: HTTP 500, or after stream headers its error event, then [DONE]
  error:nodone   as error, but the stream ends right after the error event
  error:hang     as error, but after the error event the stream neither ends nor sends
                 anything more, connection open (before stream headers: the HTTP 500 of error)
  garbage        one malformed SSE event (truncated JSON), then silence, connection open
  oversize       one SSE event of more than 4 MiB, then silence, connection open
  drop           close the connection (FIN) without another byte; at accept, after reading the request
  slow:xF        decode (and prefill still to come) F times slower
POINT:
  accept         request read, nothing sent, not even headers
  prefill        admitted, stream headers sent, prefill starting
  computed:K     output token K (0-based, counted over all choices) computed, not yet written
  sent:K         the chunk carrying output token K written and flushed
  tool:N         the engine's Nth call of a tool it runs itself returned (a Responses request
                 with --tool-server; N from 1: crash@tool:1 is right after the first call ran)
Each endpoint writes what it writes in its own shape, as vLLM does:
  chat, completions  as above
  /v1/messages       before the stream, errors as {"type":"error","error":{"type":…,"message":…}}
                     (request validation errors keep the OpenAI shape); after stream headers,
                     status:N, error and error:nodone send one "event: error" (internal_error:
                     vLLM's converter fails on the chat error event) and end the stream without
                     message_stop; error:hang sends that event and stays silent;
                     garbage/oversize a content_block_delta
  /v1/responses      errors in the OpenAI shape before the stream; after stream headers status:N,
                     error and error:nodone close the connection inside the chunked body (vLLM
                     has no error event there); error:hang sends the Responses API's own
                     "event: error" (as OpenAI's API does) and stays silent;
                     garbage/oversize a response.output_text.delta
  /v1/embeddings     never streams; computed:K and sent:K never fire (no output tokens)
`

// faultAction is what a fault does when its point is reached.
type faultAction int

const (
	actionCrash  faultAction = iota + 1 // the whole replica dies, as Server.Crash
	actionReset                         // this connection only is reset (RST)
	actionHang                          // stop writing, keep the connection open
	actionStatus                        // an HTTP status, or a mid-stream error event after headers
	actionSlow                          // decode (and any prefill still to come) N times slower

	// actionError is vLLM's own failure of a request: before headers an HTTP
	// 500, after them the error event vLLM's stream generators yield on a
	// GenerationError ("Internal server error", InternalServerError, 500),
	// then data: [DONE] as they do, unless the item says error:nodone.
	// error:hang writes the error event and then holds the stream open
	// without another byte: an engine whose failure report is not
	// followed by the end of its stream, so nothing proves it stopped.
	actionError

	// actionGarbage writes one SSE data event whose JSON is cut short, as
	// a buggy engine or a proxy that truncated an event would, then writes
	// nothing more and keeps the connection open until the client leaves
	// (or the replica dies). A non-stream reply gets a 200 and a cut-short
	// JSON body the same way. It never continues: whatever follows a
	// malformed event is the client's to judge, and a client that waits
	// learns nothing from more text.
	actionGarbage

	// actionOversize writes one SSE data event of more than 4 MiB (a valid
	// chunk whose text is that long, so no blank line comes for more than
	// 4 MiB), then writes nothing more, connection open, as actionGarbage.
	// A non-stream reply gets a 200 and a body of the same size.
	actionOversize

	// actionDrop closes the connection without writing another byte (FIN,
	// not RST): at accept, after the whole request was read and before any
	// byte of the response, which is how an engine behind a kept-alive
	// connection looks when it dies having read a request. The record shows
	// the request arrived, so a test can count the requests the engine saw.
	actionDrop
)

// faultPoint is where in a request's life a fault fires.
type faultPoint int

const (
	pointAccept   faultPoint = iota + 1 // request received, nothing sent, not even headers
	pointPrefill                        // admitted, headers sent (stream), prefill starting
	pointComputed                       // output token K computed, not yet written
	pointSent                           // output token K written and flushed
	pointTool                           // the engine's Nth call of an engine-run tool returned
)

// K counts the request's output tokens from 0 in the order they are
// computed: with n > 1 or a prompt array, decode step by step and choice by
// choice within a step, so Record.TokensComputed is K+1 when computed:K
// fires. With Config.StreamInterval above 1 a chunk carries several tokens:
// computed:K fires as soon as token K exists, so the tokens computed before
// it but still waiting for their chunk are never sent; sent:K fires once
// the whole chunk that carries token K is flushed, so Record.TokensSent
// then counts every token of that chunk, which may be more than K+1.

// fault is one parsed ACTION@POINT item.
type fault struct {
	action faultAction
	status int     // for actionStatus
	factor float64 // for actionSlow
	noDone bool    // for actionError: no data: [DONE] after the error event
	hang   bool    // for actionError: the stream is held open after the error event
	point  faultPoint
	token  int    // K of computed:K / sent:K, N of tool:N
	on     string // replica name it is restricted to; "" = any
	text   string // the item as written, for Record.Fault
}

// faultPlan is the list of faults applied to one request.
type faultPlan []fault

// parseFaultSpec parses a whole spec. An empty spec is an empty plan.
func parseFaultSpec(spec string) (faultPlan, error) {
	var plan faultPlan
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f, err := parseFault(item)
		if err != nil {
			return nil, fmt.Errorf("sim: fault %q: %w", item, err)
		}
		plan = append(plan, f)
	}
	return plan, nil
}

func parseFault(item string) (fault, error) {
	f := fault{text: item}
	body := item
	if i := strings.IndexByte(item, ';'); i >= 0 {
		body = item[:i]
		opt := strings.TrimSpace(item[i+1:])
		name, ok := strings.CutPrefix(opt, "on=")
		if !ok || name == "" {
			return f, fmt.Errorf("unknown option %q (want on=NAME)", opt)
		}
		f.on = name
	}
	action, point, ok := strings.Cut(body, "@")
	if !ok {
		return f, fmt.Errorf("want ACTION@POINT")
	}
	if err := f.parseAction(strings.TrimSpace(action)); err != nil {
		return f, err
	}
	if err := f.parsePoint(strings.TrimSpace(point)); err != nil {
		return f, err
	}
	return f, nil
}

func (f *fault) parseAction(s string) error {
	switch {
	case s == "crash":
		f.action = actionCrash
	case s == "reset":
		f.action = actionReset
	case s == "hang":
		f.action = actionHang
	case s == "error":
		f.action = actionError
	case s == "error:nodone":
		f.action, f.noDone = actionError, true
	case s == "error:hang":
		f.action, f.hang = actionError, true
	case s == "garbage":
		f.action = actionGarbage
	case s == "oversize":
		f.action = actionOversize
	case s == "drop":
		f.action = actionDrop
	case strings.HasPrefix(s, "status:"):
		code, err := strconv.Atoi(s[len("status:"):])
		if err != nil || code < 400 || code > 599 {
			return fmt.Errorf("status must be an HTTP error code 400..599, got %q", s)
		}
		f.action, f.status = actionStatus, code
	case strings.HasPrefix(s, "slow:x"):
		n, err := strconv.ParseFloat(s[len("slow:x"):], 64)
		if err != nil || !(n > 0) {
			return fmt.Errorf("slow needs a positive factor as in slow:x4, got %q", s)
		}
		f.action, f.factor = actionSlow, n
	default:
		return fmt.Errorf("unknown action %q (want crash, reset, hang, status:N, error, error:nodone, error:hang, garbage, oversize, drop or slow:xN)", s)
	}
	return nil
}

func (f *fault) parsePoint(s string) error {
	switch {
	case s == "accept":
		f.point = pointAccept
	case s == "prefill":
		f.point = pointPrefill
	case strings.HasPrefix(s, "computed:"), strings.HasPrefix(s, "sent:"):
		name, k, _ := strings.Cut(s, ":")
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 {
			return fmt.Errorf("token index must be a non-negative integer, got %q", s)
		}
		f.point, f.token = pointComputed, n
		if name == "sent" {
			f.point = pointSent
		}
	case strings.HasPrefix(s, "tool:"):
		n, err := strconv.Atoi(s[len("tool:"):])
		if err != nil || n < 1 {
			return fmt.Errorf("tool call count must be a positive integer, got %q", s)
		}
		f.point, f.token = pointTool, n
	default:
		return fmt.Errorf("unknown point %q (want accept, prefill, computed:K, sent:K or tool:N)", s)
	}
	return nil
}

// forReplica keeps the faults that apply to the replica called name.
func (p faultPlan) forReplica(name string) faultPlan {
	var out faultPlan
	for _, f := range p {
		if f.on == "" || f.on == name {
			out = append(out, f)
		}
	}
	return out
}

// String joins the items as written, for Record.Fault.
func (p faultPlan) String() string {
	texts := make([]string, len(p))
	for i, f := range p {
		texts[i] = f.text
	}
	return strings.Join(texts, ",")
}

// firesAt reports whether f fires at point (with token index k). A
// non-stream reply writes nothing per token, so there sent:K fires where
// computed:K does.
func (f fault) firesAt(point faultPoint, k int, stream bool) bool {
	if f.point == pointTool {
		return point == pointTool && f.token == k
	}
	if f.point == pointComputed || f.point == pointSent {
		if f.token != k {
			return false
		}
		if !stream && point == pointComputed {
			return true
		}
	}
	return f.point == point
}
