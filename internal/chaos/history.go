package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// seen is the client's side of one response.
type seen struct {
	status    int
	requestID string
	replayed  bool      // Idempotent-Replayed: true
	raw       []byte    // the body as received (for a client that left or stalled: up to then)
	events    []string  // the data of every complete SSE event, in order
	names     []string  // the event: name of each of events ("" for none)
	comments  int       // SSE comments (keepalives)
	err       error     // a transport error: the gateway must never cut a stream
	sentAt    time.Time // when the request was sent

	left bool // the client closed its connection on purpose (clientLeave)
	// stalled: the client stopped reading on purpose (clientStall); stallEnded says
	// whether the gateway ended the request while the client held its connection open
	// without reading, and stallPhase what the journal said when the client gave up.
	stalled    bool
	stoppedAt  time.Time
	stallEnded bool
	stallPhase string
	stallErr   error
}

// body is the text of a non-200 answer.
func (s *seen) body() string { return string(s.raw) }

// clients sends the plan's requests as their clients would, and their keyed retries.
type clients struct {
	plan    []request // a continuation reads the response id of the request it continues
	gateway string
	client  *http.Client // reads whole responses; the gateway's journal is read with it too
	sims    []*sim.Server
	// stallWait is how long a stalled client waits for the gateway to end its request
	// before it gives up and closes the connection (a violation).
	stallWait time.Duration
}

// run plays r's client, then its keyed retries.
func (cl *clients) run(ctx context.Context, r *request) {
	defer close(r.done)
	if r.continues >= 0 {
		// A continuation is sent once the response it continues is complete, as a client
		// sends the next turn; when its client never saw it complete, there is nothing to
		// continue and the request goes as a fresh one.
		prev := &cl.plan[r.continues]
		<-prev.done
		if id := completedResponseID(prev); id != "" {
			r.prevID = id
		} else {
			r.continueSkipped = true
		}
		r.bodyBytes = r.body(r.stream)
	}
	var inflight chan *seen
	onFirstEvent := func() {
		if r.key != "" && r.inflightRetry {
			inflight = make(chan *seen, 1)
			go func() { s := cl.send(ctx, r, clientNormal, nil); inflight <- &s }()
		}
	}
	// A normal keyed client retries as soon as it has read the final event, before the end
	// of the response: its outcome must already be durable.
	var final chan *seen
	onTerminal := func() {
		if r.key != "" && r.client == clientNormal {
			final = make(chan *seen, 1)
			go func() { s := cl.send(ctx, r, clientNormal, nil); final <- &s }()
		}
	}
	r.seen = cl.sendWith(ctx, r, r.client, onFirstEvent, onTerminal)
	if inflight != nil {
		r.inflight = <-inflight
	}
	switch {
	case final != nil:
		r.retry = <-final
	case r.key != "" && r.client == clientNormal && (r.seen.status != http.StatusOK || !r.stream) && r.seen.err == nil:
		// An error or whole answer ended with its body: its outcome must already be
		// durable too.
		s := cl.send(ctx, r, clientNormal, nil)
		r.retry = &s
	case r.key != "" && r.seen.requestID != "":
		// The client left or never saw the end: it retries once the request is over.
		cl.waitDone(ctx, r.seen.requestID, 10*time.Second)
		s := cl.send(ctx, r, clientNormal, nil)
		r.retry = &s
	}
}

// send sends r's request once and reads the response as a client of kind k would.
func (cl *clients) send(ctx context.Context, r *request, k clientKind, onTerminal func()) seen {
	return cl.sendWith(ctx, r, k, nil, onTerminal)
}

func (cl *clients) sendWith(ctx context.Context, r *request, k clientKind, onFirstEvent, onTerminal func()) seen {
	client := cl.client
	if k == clientStall {
		// Its own connection with a small receive buffer, so that the gateway's writes
		// block soon after the client stops reading.
		tr := &http.Transport{DisableKeepAlives: true, DialContext: smallReceiveBuffer}
		defer tr.CloseIdleConnections()
		client = &http.Client{Transport: tr}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.gateway+r.path(), bytes.NewReader(r.bodyBytes))
	if err != nil {
		return seen{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if r.endpoint == "messages" {
		req.Header.Set("Anthropic-Version", "2023-06-01") // as the Anthropic SDKs send it
	}
	if r.fault != "" {
		req.Header.Set("X-Sim-Fault", r.fault)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	s := seen{sentAt: time.Now()}
	resp, err := client.Do(req)
	if err != nil {
		s.err = err
		return s
	}
	defer resp.Body.Close()
	s.status, s.requestID = resp.StatusCode, resp.Header.Get("X-Request-Id")
	s.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if k == clientStall && s.status == http.StatusOK {
		cl.stall(ctx, r, resp, &s)
		return s
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var raw bytes.Buffer
	data, terminal, name := 0, false, ""
	for {
		line, err := br.ReadBytes('\n')
		raw.Write(line)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			break
		}
		if n, ok := bytes.CutPrefix(line, []byte("event: ")); ok {
			name = string(bytes.TrimRight(n, "\r\n"))
		}
		d, isData := bytes.CutPrefix(line, []byte("data: "))
		isComment := bytes.HasPrefix(line, []byte(":"))
		if isData {
			data++
			if data == 1 && onFirstEvent != nil {
				onFirstEvent()
			}
			if d = bytes.TrimRight(d, "\r\n"); string(d) == "[DONE]" || bytes.HasPrefix(d, []byte(`{"error"`)) || terminalEvents[name] {
				if !terminal && onTerminal != nil {
					onTerminal()
				}
				terminal = true
			}
			name = ""
		}
		if k == clientLeave && s.status == http.StatusOK &&
			((r.leaveAfter < 0 && (isComment || isData)) || (isData && data > r.leaveAfter && r.leaveAfter >= 0)) {
			s.left = true
			break // the deferred Close drops the connection mid-response
		}
	}
	s.raw = raw.Bytes()
	s.parse()
	return s
}

// terminalEvents are the named events that end a Messages or Responses stream: its end,
// or its error (a Responses error event is followed by response.failed in the same write).
var terminalEvents = map[string]bool{"message_stop": true, "error": true,
	"response.completed": true, "response.incomplete": true, "response.failed": true}

// completedResponseID is the id of the Responses answer prev's client saw complete ("" when
// it saw none): a whole answer's, or the one a stream's response.completed carried.
func completedResponseID(prev *request) string {
	s := &prev.seen
	if s.status != http.StatusOK || s.err != nil || s.left || s.stalled {
		return ""
	}
	var resp struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if !prev.stream {
		if json.Unmarshal(s.raw, &resp) != nil || (resp.Status != "completed" && resp.Status != "incomplete") {
			return ""
		}
		return resp.ID
	}
	for i, d := range s.events {
		var ev struct {
			Response json.RawMessage `json:"response"`
		}
		if (s.names[i] == "response.completed" || s.names[i] == "response.incomplete") && json.Unmarshal([]byte(d), &ev) == nil &&
			json.Unmarshal(ev.Response, &resp) == nil {
			return resp.ID
		}
	}
	return ""
}

// stall reads r.stallAfter bytes of a stream, then stops reading with the connection open
// until the gateway has ended the request (or stallWait has passed). (An error answer is
// read whole: it is not a stream a client stalls on.)
func (cl *clients) stall(ctx context.Context, r *request, resp *http.Response, s *seen) {
	buf := make([]byte, r.stallAfter)
	n := 0
	var err error
	for n < len(buf) && err == nil {
		var m int
		m, err = resp.Body.Read(buf[n:])
		n += m
	}
	s.raw = buf[:n]
	s.parse()
	if n < len(buf) {
		// The answer ended before the client meant to stop reading: cleanly (EOF) or cut.
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
		return
	}
	s.stalled, s.stoppedAt = true, time.Now()
	j, err := cl.waitDone(ctx, s.requestID, cl.stallWait)
	s.stallPhase, s.stallErr = j.Phase, err
	s.stallEnded = err == nil && j.Phase == "done"
}

// smallReceiveBuffer dials with a 4 KiB receive buffer.
func smallReceiveBuffer(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetReadBuffer(4096); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// waitDone long-polls the journal until request id is done or wait has passed. Each poll
// waits less than the gateway's client write timeout, which bounds every response it
// writes, the long poll's included.
func (cl *clients) waitDone(ctx context.Context, id string, wait time.Duration) (journal, error) {
	deadline := time.Now().Add(wait)
	for {
		slice := min(time.Until(deadline), pollSlice)
		j, err := cl.journal(ctx, id, max(slice, time.Millisecond))
		if err == nil && j.Phase == "done" {
			return j, nil
		}
		if time.Until(deadline) <= 0 || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("still %q after %s", j.Phase, wait)
			}
			return j, err
		}
		var status statusError
		if errors.As(err, &status) {
			return j, err // the gateway answered: asking again changes nothing
		}
		if err != nil && !errors.Is(err, errNotDone) {
			// A poll that failed outright is tried again at the pace of the slices.
			t := time.NewTimer(slice)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// pollSlice is how long one long poll of the journal waits.
const pollSlice = clientWriteTimeout / 2

var errNotDone = errors.New("not done")

// statusError is an answer of the journal other than 200.
type statusError struct {
	id     string
	status int
}

func (e statusError) Error() string {
	return fmt.Sprintf("GET /v1/requests/%s: status %d", e.id, e.status)
}

// journal reads request id's record, waiting up to wait for it to be done.
func (cl *clients) journal(ctx context.Context, id string, wait time.Duration) (journal, error) {
	var j journal
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/requests/%s?wait=%s", cl.gateway, id, wait), nil)
	if err != nil {
		return j, err
	}
	resp, err := cl.client.Do(req)
	if err != nil {
		return j, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return j, statusError{id, resp.StatusCode}
	}
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return j, err
	}
	if j.Phase != "done" {
		return j, errNotDone
	}
	return j, nil
}

// parse splits s.raw into its events.
func (s *seen) parse() { s.events, s.names, s.comments = parseNamedSSE(s.raw) }

// parseSSE returns the data of every complete "data:" line of raw, and the number of
// comment lines. A line cut short (a client that stopped reading mid-event) is not an event.
func parseSSE(raw []byte) (events []string, comments int) {
	events, _, comments = parseNamedSSE(raw)
	return events, comments
}

// parseNamedSSE is parseSSE that also returns the "event:" name of each event ("" for an
// event without one).
func parseNamedSSE(raw []byte) (events, names []string, comments int) {
	name := ""
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(raw[:i]), "\r")
		raw = raw[i+1:]
		switch {
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			events = append(events, line[len("data: "):])
			names = append(names, name)
			name = ""
		case strings.HasPrefix(line, ":"):
			comments++
		}
	}
	return events, names, comments
}

// smallSendBuffers gives every connection the gateway accepts a small send buffer, so that
// a client that stops reading blocks the gateway's writes within kilobytes instead of the
// megabytes that loopback's auto-tuned buffers would take first.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		_ = tc.SetWriteBuffer(8192) // without it the stall is only noticed later
	}
	return c, err
}
