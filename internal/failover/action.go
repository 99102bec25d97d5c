package failover

import "github.com/fencegate/fencegate/internal/openai"

// ActionKind names what the shell must do.
//
// Ordering rules (the shell performs the actions of one Step in the order given):
//   - ActRecordBoundary, when returned, is the last action of its Step, and the shell must
//     step EvBoundaryRecorded before any other event: the event that would cross the
//     boundary is parked in the machine and delivered (or dropped) by that answer, so the
//     shell keeps its bytes until then.
//   - ActTryRerun, likewise, is the last action of its Step, and the shell must step
//     EvRerunBudget before any other event: the failed attempt is ended, and rerun or not,
//     by that answer.
//   - ActMarkFirstDelta comes BEFORE the ActWriteHeld/ActWrite that crosses the delivery
//     boundary. The shell records first_delta_sent before it writes those bytes.
//   - ActSendHeaders comes before any body write of a streaming response.
//   - ActEndAttempt of a failed attempt comes before ActStartAttempt of its rerun; every
//     dispatched attempt gets exactly one ActEndAttempt, before the terminal action.
//   - ActFinish and ActFail are terminal: exactly one of them is ever returned, last.
type ActionKind uint8

const (
	// ActStartAttempt: choose a replica not yet tried (Machine.Tried, Tried) and start Attempt;
	// report EvDispatched or EvNoReplica. Rerun is true for every attempt after the first.
	ActStartAttempt ActionKind = iota + 1
	// ActEndAttempt: Attempt is over; release its replica and journal how it ended (Reason).
	// With Cancel the gateway fences it router-side: stop reading it, close its upstream
	// connection (the engine sees the disconnect) and drop anything it still sends.
	// Without Cancel it completed, and its connection may be reused. With AwaitFence, the
	// attempt was uncertain and a rerun waits for proof that it stopped: send the agent a
	// cancel and report EvFenced on its ack or at the lease's expiry.
	ActEndAttempt
	// ActSendHeaders: write the streaming response headers (200, text/event-stream).
	ActSendHeaders
	// ActKeepalive: write an SSE comment. It is not output: it does not cross the boundary.
	ActKeepalive
	// ActRecordBoundary: make the delivery boundary durable (the request has an
	// Idempotency-Key, so another gateway may take it over) and answer EvBoundaryRecorded.
	ActRecordBoundary
	// ActMarkFirstDelta: record first_delta_sent before the write that follows.
	ActMarkFirstDelta
	// ActHold: keep the current event's bytes; they go out with the first output-bearing event.
	ActHold
	// ActDiscardHeld: drop held events; the attempt that produced them failed.
	ActDiscardHeld
	// ActWriteHeld: write the held events, in order.
	ActWriteHeld
	// ActWrite: write the current event (or, for EvBody, the response body) to the client.
	ActWrite
	// ActFinish: the request ended with Outcome (completed, cancelled or client_stalled).
	// For a completed stream whose engine sent no [DONE] after its last finish chunk,
	// WriteDone asks the shell to write one.
	ActFinish
	// ActFail: the request ended with Err. AsEvent: headers were sent, so write Err as a final
	// SSE event (no [DONE]); otherwise answer with Err.Status and the error body.
	ActFail
	// ActTryRerun: Attempt failed and every check of the policy but the pool's retry budget
	// allows a rerun (docs/design.md §3). Withdraw one rerun from the budget and answer
	// EvRerunBudget, Granted when there was one. A denied rerun withdraws nothing.
	ActTryRerun
)

// Outcome is how a logical request ended.
type Outcome uint8

const (
	Running Outcome = iota
	Completed
	Interrupted
	Failed
	Cancelled
	// ClientStalled: the client stopped accepting bytes for client_write_timeout; the
	// gateway treated it as gone.
	ClientStalled
)

func (o Outcome) String() string {
	switch o {
	case Completed:
		return "completed"
	case Interrupted:
		return "interrupted"
	case Failed:
		return "failed"
	case Cancelled:
		return "cancelled"
	case ClientStalled:
		return "client_stalled"
	}
	return ""
}

// Action is one thing the shell must do. Only the fields its Kind names are set.
type Action struct {
	Kind       ActionKind
	Attempt    int
	Rerun      bool
	Reason     EndReason
	Outcome    Outcome
	WriteDone  bool
	AsEvent    bool
	Cancel     bool
	AwaitFence bool
	Err        *openai.Error
}
