package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/faultproxy"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/trace"
)

// Slack of the wire judge's record rules: an engine request may finish this long after
// its client left (it had nothing left to decode), and may seem to overlap the next one
// by this much (an engine notices a closed connection a moment after it closed).
const (
	leaveGrace   = 50 * time.Millisecond
	overlapGrace = 100 * time.Millisecond
)

// traceLimit is how much of a response's text a violation's trace keeps (the rest as
// hashes).
const traceLimit = 1 << 20

// try runs case c once: it arms the trigger of a client or partition action, plays the
// client, waits for the replicas to end the request's engine requests, and judges.
func (s *sweeper) try(ctx context.Context, c sweepCase) CaseResult {
	res := CaseResult{N: c.n, Point: c.point, Action: c.action, Whole: c.whole, Fault: simFault(c)}
	s.settle(ctx)
	before := s.reps.recordIDs()
	toolsBefore := len(s.reps.tools.Actions())
	r := s.caseRequest(c)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl := &caseClient{s: s, c: c, r: r, before: before}
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer cancel() // before the wait: it ends the watchers
	kind, k := pointToken(c.point)
	var cut atomic.Pointer[faultproxy.Proxy]
	switch {
	case c.action == "partition" && c.point == "accept":
		// Cut before the request leaves: the faulted replica's link.
		p := s.reps.proxies[Faulted]
		p.BlackHole(faultproxy.Both)
		cut.Store(p)
		cl.fired.Store(true)
	case c.action == "partition":
		fired := s.reps.watch(cctx, &watchers, before, recordReached(kind, k))
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			select {
			case name := <-fired:
				p := s.reps.proxies[name]
				p.BlackHole(faultproxy.Both)
				cut.Store(p)
				cl.fired.Store(true)
			case <-cctx.Done():
			}
		}()
	case (c.action == "leave" || c.action == "stall") && (kind == "prefill" || kind == "computed" || kind == "tool"):
		cl.signal = s.reps.watch(cctx, &watchers, before, recordReached(kind, k))
	}
	cl.play(cctx)
	s.awaitRecords(ctx, before, cl)
	if p := cut.Load(); p != nil {
		p.Heal()
	}
	s.rest = restAfter(c)

	s.waitUp(ctx) // a crashed replica answers for its records once it is back
	recs, checkedAt, err := s.reps.fetchRecords(ctx, s.client, before)
	// Every call the tool server received since the try began is this request's: the
	// cases run one after another, and the last one's engine requests have ended.
	toolCalls := s.reps.tools.Actions()[toolsBefore:]
	h := &wireHistory{path: r.path(), status: cl.status, contentType: cl.contentType, received: cl.judged.Received(cl.status, cl.contentType),
		transport: cl.transport, timedOut: cl.timedOut, sentAt: cl.sentAt, firstOutputAt: cl.firstOutputAt, endedAt: cl.endedAt,
		left: cl.left.Load(), leftAt: cl.leftAt, stalled: cl.stalled, stalledAt: cl.stalledAt, heldAfterStall: cl.held,
		stallWait: s.cfg.StallWait, records: recs, checkedAt: checkedAt, answers: s.answers(r), leaveGrace: leaveGrace, overlapGrace: overlapGrace,
		engineTool: r.engineTool, toolCalls: toolCallsOn(toolCalls, recs)}
	v := judgeWire(h)
	if err != nil {
		v.violations = append(v.violations, violation{"records", err.Error()})
	}
	res.Ending, res.Tokens, res.Violations, res.ToolCalls = v.ending, v.tokens, v.violations, len(toolCalls)
	switch {
	case isReplicaAction(c.action):
		// The fault came into play when the faulted replica took the request (at
		// toolPoint: and ran the tool, after which the fault fires).
		res.Missed = true
		for _, rec := range recs {
			res.Missed = res.Missed && (rec.Fault == "" || (c.engineTool() && rec.ToolCalls == 0))
		}
	default:
		res.Missed = !cl.fired.Load()
	}
	if res.Missed && len(res.Violations) == 0 {
		return res
	}
	if s.cfg.Traces != "" {
		for _, viol := range res.Violations {
			path, err := writeTrace(s.cfg.Traces, c, viol, cl, h, v, s.reps.engineURLs())
			if err != nil {
				res.Violations = append(res.Violations, violation{"trace", err.Error()})
				break
			}
			res.Traces = append(res.Traces, path)
		}
	}
	return res
}

// settle waits out the last case's rest and until every replica listens.
func (s *sweeper) settle(ctx context.Context) {
	if s.rest > 0 {
		t := time.NewTimer(s.rest)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	s.waitUp(ctx)
}

// waitUp waits until every replica listens (a crashed one restarts on its own).
func (s *sweeper) waitUp(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, srv := range s.reps.sims {
		_ = srv.WaitUp(wctx) // a replica that stays down shows in the cases' records
	}
}

// recordReached is the condition of an engine request that reached a point: prefill (the
// request was read and taken in), computed:K or sent:K tokens, or tool:N (its Nth call of
// an engine-run tool returned).
func recordReached(kind string, k int) func(sim.Record) bool {
	switch kind {
	case "computed":
		return func(r sim.Record) bool { return r.TokensComputed >= k }
	case "sent":
		return func(r sim.Record) bool { return r.TokensSent >= k }
	case "tool":
		return func(r sim.Record) bool { return r.ToolCalls >= k }
	}
	return func(r sim.Record) bool { return r.PromptTokens > 0 }
}

// awaitRecords waits until every engine request of the case has ended, for at most
// EndWait after the response ended (LeaveWait after the client left).
func (s *sweeper) awaitRecords(ctx context.Context, before map[string]bool, cl *caseClient) {
	deadline := cl.endedAt.Add(s.cfg.EndWait)
	if cl.left.Load() {
		deadline = cl.leftAt.Add(s.cfg.LeaveWait)
	}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(s.reps.running(before)) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the replicas' own records
	}
}

// caseClient is the client of one case: it sends the request, reads the answer as it
// comes, and leaves or stops reading where the case says.
type caseClient struct {
	s      *sweeper
	c      sweepCase
	r      *request
	before map[string]bool
	// signal fires when a replica reached the case's point (a leave or stall at prefill
	// or computed:K).
	signal <-chan string
	// fired: the case's action took place (a leave, a stall, a partition).
	fired atomic.Bool

	status      int
	contentType string
	header      http.Header
	// judged keeps everything received, for the judge; kept the first traceLimit bytes
	// of it, for a trace.
	judged, kept                   *trace.Recorder
	transport                      error
	timedOut                       bool
	sentAt, firstOutputAt, endedAt time.Time
	left                           atomic.Bool
	leftAt                         time.Time
	stalled                        bool
	stalledAt                      time.Time
	held                           []string
	tokens                         int
	partial                        []byte
	leaveMu                        sync.Mutex
	stallNow                       atomic.Bool
	cancelRequest                  context.CancelFunc
	reqHeader                      http.Header
	requestBody                    []byte
	requestPath                    string
}

// play sends the request and reads the response.
func (cl *caseClient) play(ctx context.Context) {
	s, c := cl.s, cl.c
	cl.judged, cl.kept = trace.NewRecorder(1<<62, cl.r.stream), trace.NewRecorder(traceLimit, cl.r.stream)
	ctx, timeout := context.WithTimeout(ctx, s.cfg.ClientTimeout)
	defer timeout()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl.cancelRequest = cancel
	kind, k := pointToken(c.point)

	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true}
	if c.action == "stall" {
		tr.DialContext = smallReceiveBufferDial // so that the gateway's writes block soon
	}
	defer tr.CloseIdleConnections()
	if c.action == "leave" && kind == "accept" {
		// Leave as soon as the request is out, before any answer.
		rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cl.leave() }})
	}
	cl.requestPath, cl.requestBody = cl.r.path(), cl.r.bodyBytes
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.target+cl.requestPath, bytes.NewReader(cl.requestBody))
	if err != nil {
		cl.transport, cl.endedAt = err, time.Now()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if cl.r.fault != "" {
		req.Header.Set("X-Sim-Fault", cl.r.fault)
	}
	cl.reqHeader = req.Header.Clone()
	if cl.signal != nil {
		go func() {
			select {
			case <-cl.signal:
				if c.action == "leave" {
					cl.leave()
				} else {
					cl.stallNow.Store(true)
				}
			case <-rctx.Done():
			}
		}()
	}
	cl.sentAt = time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cl.finish(ctx, err)
		return
	}
	defer resp.Body.Close()
	cl.status, cl.contentType, cl.header = resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header
	if c.action == "stall" && kind == "accept" {
		cl.stallNow.Store(true)
	}
	buf := make([]byte, 32<<10)
	for {
		if cl.stallNow.Load() && !cl.stalled {
			cl.stall(ctx)
		}
		n, err := resp.Body.Read(buf)
		if n > 0 {
			cl.receive(buf[:n])
			if kind == "sent" && cl.tokens >= k && !cl.fired.Load() {
				switch c.action {
				case "leave":
					cl.leave()
				case "stall":
					cl.stallNow.Store(true)
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			cl.finish(ctx, err)
			return
		}
	}
}

// leave closes the client's connection, once.
func (cl *caseClient) leave() {
	cl.leaveMu.Lock()
	defer cl.leaveMu.Unlock()
	if cl.left.Load() {
		return
	}
	cl.leftAt = time.Now()
	cl.left.Store(true)
	cl.fired.Store(true)
	cl.cancelRequest()
}

// stall stops reading until the replicas have ended the case's engine requests, or
// StallWait has passed; what still runs then is held by the stalled client.
func (cl *caseClient) stall(ctx context.Context) {
	s := cl.s
	cl.stalled, cl.stalledAt = true, time.Now()
	cl.fired.Store(true)
	deadline := cl.stalledAt.Add(s.cfg.StallWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(s.reps.running(cl.before)) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the replicas' own records
	}
	cl.held = s.reps.running(cl.before)
}

// finish records how the response ended.
func (cl *caseClient) finish(ctx context.Context, err error) {
	cl.leaveMu.Lock()
	defer cl.leaveMu.Unlock()
	cl.endedAt = time.Now()
	if cl.left.Load() {
		cl.endedAt = cl.leftAt
		return
	}
	if err != nil {
		cl.transport = err
		if ctx.Err() != nil {
			cl.timedOut = true
		}
	}
	if len(cl.partial) > 0 {
		cl.event(cl.partial) // an event cut short: its text is judged as received
	}
}

// receive takes bytes of the body as they arrive: it records them and reads every event
// they complete, for the first output and the tokens received so far.
func (cl *caseClient) receive(b []byte) {
	cl.judged.Write(b)
	cl.kept.Write(b)
	if !bytes.Contains([]byte(cl.contentType), []byte("text/event-stream")) {
		return
	}
	cl.partial = append(cl.partial, b...)
	for {
		i := eventEnd(cl.partial)
		if i < 0 {
			return
		}
		cl.event(cl.partial[:i])
		cl.partial = cl.partial[i:]
	}
}

func (cl *caseClient) event(raw []byte) {
	ev := readEvent(cl.requestPath, string(raw))
	if ev.output && cl.firstOutputAt.IsZero() {
		cl.firstOutputAt = time.Now()
	}
	for _, t := range ev.text {
		cl.tokens += words(t)
	}
}

// eventEnd is the length of the first complete event of b, through its blank line, or -1.
func eventEnd(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		switch {
		case b[i] == '\n' && b[i+1] == '\n':
			return i + 2
		case b[i] == '\n' && b[i+1] == '\r' && i+2 < len(b) && b[i+2] == '\n':
			return i + 3
		}
	}
	return -1
}

// smallReceiveBufferDial dials with a 4 KiB receive buffer, set before the connection is
// made so that the window the client offers stays small.
func smallReceiveBufferDial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	return d.DialContext(ctx, network, addr)
}

// replicaTrace is a record for a trace, with the replica's engine URL.
func attemptsOf(recs []replicaRecord, urls map[string]string) []trace.Attempt {
	out := make([]trace.Attempt, len(recs))
	for i, r := range recs {
		id := r.AttemptID
		if id == "" {
			id = r.ID
		}
		out[i] = trace.Attempt{ID: id, N: i + 1, Replica: r.Replica, URL: urls[r.Replica], StartedAt: r.Started, EndedAt: r.Ended, EndReason: r.Outcome}
	}
	return out
}

// sortRecords orders records by start.
func sortRecords(recs []replicaRecord) {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Started.Before(recs[j].Started) })
}

// decodeRecords reads GET /sim/requests.
func decodeRecords(b []byte) ([]sim.Record, error) {
	var recs []sim.Record
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("GET /sim/requests: %w", err)
	}
	return recs, nil
}
