package failover

import (
	"fmt"
	"testing"
	"time"
)

// shell is a test stand-in for the gateway: it performs actions the way the gateway must and
// checks, after every step, the invariants of docs/design.md §2 and §3.
type shell struct {
	t   *testing.T
	m   *Machine
	now time.Time
	// budget is the pool's retry budget the shell asks on ActTryRerun (nil allows all).
	budget *RetryBudget
	asks   int // ActTryRerun answered

	headersSent   bool
	firstDelta    bool
	publisher     int   // the one attempt whose bytes reached the client (0: none yet)
	written       []int // attempt of each written event (held ones included)
	heldBy        int   // attempt whose events are held
	held          int
	terminal      []Action
	started       []int
	cancelled     []int
	keepalives    int
	pendingStart  int
	maxAttempts   int
	clientGone    bool
	dials         int
	committedSeen bool
	ended         map[int]bool
	dispatched    []int
	recordPending bool // ActRecordBoundary returned, EvBoundaryRecorded not yet stepped
	recorded      bool // the durable boundary record succeeded
	// finishedWritten are the choices whose finish reached the client; parkedFinished
	// those of the event parked for a boundary record.
	finishedWritten uint64
	parkedFinished  uint64
	// passChecks counts the chunks checkPassesAsOne compared.
	passChecks int
}

func newShell(t *testing.T, cfg Config) *shell {
	return &shell{t: t, m: New(cfg), now: time.Unix(1_700_000_000, 0), maxAttempts: cfg.MaxAttempts}
}

func (s *shell) step(ev Event) []Action {
	s.t.Helper()
	wasDone := s.m.Done()
	if ev.Kind == EvFailed && ev.Dial && ev.Attempt == s.m.Current() && !s.m.Done() && !s.m.Committed() {
		s.dials++
	}
	if s.recordPending && ev.Kind != EvBoundaryRecorded {
		s.t.Fatalf("event %v stepped while a boundary record was pending", ev.Kind)
	}
	if ev.Kind == EvBoundaryRecorded {
		s.recordPending = false
		s.recorded = ev.Err == nil
	}
	s.checkPassesAsOne(ev)
	nAttempts := len(s.m.Attempts())
	acts := s.m.Step(ev, s.now)
	if len(s.m.Attempts()) > nAttempts {
		s.dispatched = append(s.dispatched, s.m.Attempts()[nAttempts].N)
	}
	if wasDone && len(acts) > 0 {
		s.t.Fatalf("actions after the terminal action: %+v", acts)
	}
	for i, a := range acts {
		if a.Kind == ActTryRerun && i != len(acts)-1 {
			s.t.Fatalf("try-rerun is not the last action of its step: %s", kinds(acts))
		}
		s.apply(a, ev, acts[:i])
	}
	s.check()
	if n := len(acts); n > 0 && acts[n-1].Kind == ActTryRerun {
		// The shell answers at once from the pool's budget, as the gateway does, and the
		// machine's answer completes the step.
		out := append([]Action(nil), acts...)
		return append(out, s.step(Event{Kind: EvRerunBudget, Attempt: acts[n-1].Attempt, Granted: s.budget.TryRerun(s.now)})...)
	}
	return acts
}

func (s *shell) apply(a Action, ev Event, before []Action) {
	t := s.t
	t.Helper()
	switch a.Kind {
	case ActTryRerun:
		if !s.m.cfg.RetryBudget {
			t.Fatalf("try-rerun of attempt %d without a retry budget", a.Attempt)
		}
		if s.committedSeen || s.m.Committed() {
			t.Fatalf("try-rerun of attempt %d after the delivery boundary", a.Attempt)
		}
		if a.Attempt != s.m.Current() || s.ended[a.Attempt] {
			t.Fatalf("try-rerun of attempt %d, current %d, ended %v", a.Attempt, s.m.Current(), s.ended[a.Attempt])
		}
		s.asks++
	case ActStartAttempt:
		if s.committedSeen {
			t.Fatalf("attempt %d started after the delivery boundary", a.Attempt)
		}
		if s.clientGone {
			t.Fatalf("attempt %d started after the client went away", a.Attempt)
		}
		if s.m.engineToolsUnsafe() {
			for _, info := range s.m.Attempts() {
				if info.EngineMayHaveActed {
					t.Fatalf("attempt %d started after attempt %d's engine may have run a tool", a.Attempt, info.N)
				}
			}
		}
		s.started = append(s.started, a.Attempt)
		s.pendingStart = a.Attempt
	case ActEndAttempt:
		if s.ended[a.Attempt] {
			t.Fatalf("attempt %d ended twice", a.Attempt)
		}
		if s.ended == nil {
			s.ended = map[int]bool{}
		}
		s.ended[a.Attempt] = true
		if a.Cancel {
			s.cancelled = append(s.cancelled, a.Attempt)
		}
	case ActRecordBoundary:
		if s.firstDelta || s.recordPending {
			t.Fatalf("boundary recorded twice")
		}
		s.recordPending = true
		s.parkedFinished = ev.Finished
	case ActSendHeaders:
		if s.headersSent {
			t.Fatalf("headers sent twice")
		}
		s.headersSent = true
	case ActKeepalive:
		if !s.headersSent {
			t.Fatalf("keepalive before headers")
		}
		s.keepalives++
	case ActMarkFirstDelta:
		if s.firstDelta {
			t.Fatalf("first delta marked twice")
		}
		if s.m.cfg.DurableBoundary && !s.recorded {
			t.Fatalf("first delta marked before the boundary was recorded durably")
		}
		s.firstDelta = true
	case ActHold:
		if s.held > 0 && s.heldBy != a.Attempt {
			t.Fatalf("attempt %d holds events while attempt %d's are still held", a.Attempt, s.heldBy)
		}
		s.heldBy, s.held = a.Attempt, s.held+1
	case ActDiscardHeld:
		s.held = 0
	case ActWriteHeld, ActWrite:
		if !s.firstDelta {
			t.Fatalf("write before first_delta_sent was recorded (actions so far %+v)", before)
		}
		if s.m.cfg.Stream && !s.headersSent {
			t.Fatalf("body write before headers")
		}
		if s.publisher == 0 {
			s.publisher = a.Attempt
		}
		if a.Attempt != s.publisher {
			t.Fatalf("attempt %d published to a stream that attempt %d already published to", a.Attempt, s.publisher)
		}
		if a.Kind == ActWriteHeld {
			if s.held == 0 || s.heldBy != a.Attempt {
				t.Fatalf("write of held events of attempt %d, but held=%d by %d", a.Attempt, s.held, s.heldBy)
			}
			for ; s.held > 0; s.held-- {
				s.written = append(s.written, a.Attempt)
			}
		} else {
			if ev.Attempt != a.Attempt && !(ev.Kind == EvBoundaryRecorded && a.Attempt == s.m.Current()) {
				t.Fatalf("write of attempt %d for an event of attempt %d", a.Attempt, ev.Attempt)
			}
			s.written = append(s.written, a.Attempt)
			if ev.Kind == EvChunk {
				s.finishedWritten |= ev.Finished
			} else if ev.Kind == EvBoundaryRecorded {
				s.finishedWritten |= s.parkedFinished
			}
		}
	case ActFinish, ActFail:
		s.terminal = append(s.terminal, a)
		if a.Kind == ActFinish && a.Outcome == Completed && s.m.cfg.Stream {
			if want := uint64(1)<<s.m.cfg.Choices - 1; s.finishedWritten&want != want {
				t.Fatalf("stream completed with finished choices %b of %d", s.finishedWritten, s.m.cfg.Choices)
			}
		}
		for _, n := range s.dispatched {
			if !s.ended[n] {
				t.Fatalf("request ended while attempt %d was not ended", n)
			}
		}
		if a.Kind == ActFail && a.AsEvent != s.headersSent {
			t.Fatalf("error AsEvent=%v but headersSent=%v", a.AsEvent, s.headersSent)
		}
		if a.Kind == ActFail && a.Err == nil {
			t.Fatalf("ActFail without an error")
		}
		if a.Kind == ActFail && s.m.engineToolsUnsafe() && *a.Err.Retryable {
			for _, info := range s.m.Attempts() {
				if info.EngineMayHaveActed {
					t.Fatalf("error %+v retryable after attempt %d's engine may have run a tool", a.Err, info.N)
				}
			}
		}
		if a.Kind == ActFail && (a.Outcome == Interrupted) != s.firstDelta {
			t.Fatalf("outcome %v with first delta %v", a.Outcome, s.firstDelta)
		}
	default:
		t.Fatalf("unknown action %+v", a)
	}
}

func (s *shell) check() {
	t := s.t
	t.Helper()
	if len(s.terminal) > 1 {
		t.Fatalf("%d terminal actions: %+v", len(s.terminal), s.terminal)
	}
	if s.m.Committed() {
		s.committedSeen = true
	}
	if len(s.started)-s.dials > s.maxAttempts {
		t.Fatalf("%d attempts started, max %d", len(s.started), s.maxAttempts)
	}
	if s.m.Done() != (len(s.terminal) == 1) {
		t.Fatalf("Done()=%v with %d terminal actions", s.m.Done(), len(s.terminal))
	}
}

func (s *shell) advance(d time.Duration) { s.now = s.now.Add(d) }

// tickUntilDeadline advances the fake clock to the machine's deadline and ticks.
func (s *shell) tickUntilDeadline() []Action {
	s.t.Helper()
	d := s.m.Deadline()
	if d.IsZero() {
		s.t.Fatalf("no deadline")
	}
	if d.After(s.now) {
		s.now = d
	}
	return s.step(Event{Kind: EvTick})
}

func kinds(acts []Action) string {
	out := ""
	for i, a := range acts {
		if i > 0 {
			out += " "
		}
		name := a.Kind.String()
		if a.Kind == ActEndAttempt && a.Cancel {
			name = "cancel"
		}
		out += name
		if a.Attempt > 0 {
			out += fmt.Sprintf("(%d)", a.Attempt)
		}
	}
	return out
}
