package failover

import "github.com/fencegate/fencegate/internal/openai"

// ActionKind names what the shell must do.
//
// Ordering rules (the shell performs the actions of one Step in the order given):
//   - ActMarkFirstDelta comes BEFORE the ActWriteHeld/ActWrite that crosses the delivery
//     boundary. The shell must record first_delta_sent (durably, when the request carries an
//     Idempotency-Key) before it writes those bytes.
//   - ActSendHeaders comes before any body write of a streaming response.
//   - ActCancelAttempt of a failed attempt comes before ActStartAttempt of its rerun.
//   - ActFinish and ActFail are terminal: exactly one of them is ever returned, last.
type ActionKind uint8

const (
	// ActStartAttempt: choose a replica not yet tried (Machine.Tried) and start Attempt;
	// report EvDispatched or EvNoReplica. Rerun is true for every attempt after the first.
	ActStartAttempt ActionKind = iota + 1
	// ActCancelAttempt: fence Attempt router-side: stop reading it, close its upstream
	// connection (the engine sees the disconnect) and drop anything it still sends. With
	// AwaitFence, the attempt was uncertain and a rerun waits for proof that it stopped:
	// send the agent a cancel and report EvFenced on its ack or at the lease's expiry.
	ActCancelAttempt
	// ActSendHeaders: write the streaming response headers (200, text/event-stream).
	ActSendHeaders
	// ActKeepalive: write an SSE comment. It is not output: it does not cross the boundary.
	ActKeepalive
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
	// ActFinish: the request ended with Outcome (completed or cancelled). For a completed
	// stream whose engine sent no [DONE] after its finish chunk, WriteDone asks the shell to
	// write one.
	ActFinish
	// ActFail: the request ended with Err. AsEvent: headers were sent, so write Err as a final
	// SSE event (no [DONE]); otherwise answer with Err.Status and the error body.
	ActFail
)

// Outcome is how a logical request ended.
type Outcome uint8

const (
	Running Outcome = iota
	Completed
	Interrupted
	Failed
	Cancelled
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
	}
	return ""
}

// Action is one thing the shell must do. Only the fields its Kind names are set.
type Action struct {
	Kind       ActionKind
	Attempt    int
	Rerun      bool
	Reason     string
	Outcome    Outcome
	WriteDone  bool
	AsEvent    bool
	AwaitFence bool
	Err        *openai.Error
}
