package failover

import (
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

// EventKind names what happened.
type EventKind uint8

const (
	// EvStart begins the logical request. It must be the first event.
	EvStart EventKind = iota + 1
	// EvDispatched: the shell chose Replica for Attempt and is sending the request.
	EvDispatched
	// EvNoReplica: the shell found no available replica for Attempt, or could not send it
	// (Reason says why); nothing reached any replica.
	EvNoReplica
	// EvChunk: one complete SSE event of Attempt, classified (Chunk). Tokens is the output
	// tokens it carries, Size its length in bytes, Finished/FinishedHigh the choices it
	// finishes (see sse.Summary). Err is set when the event is an engine error.
	EvChunk
	// EvBody: the complete non-streaming response body of Attempt arrived (Tokens = its
	// completion tokens).
	EvBody
	// EvEnd: Attempt's stream ended cleanly (EOF) without the shell seeing a failure.
	EvEnd
	// EvFailed: Attempt failed; Failure classifies it, Reason says why for the journal
	// (EndConnectionRefused, EndEngineStatus(500), ...), Err is the engine's error if it sent
	// one, Status the engine's HTTP status if it answered with one.
	EvFailed
	// EvClientGone: the client went away; Stalled when it stopped accepting bytes for
	// client_write_timeout rather than closing the connection.
	EvClientGone
	// EvTick: time passed; the shell sends it when Deadline() is reached.
	EvTick
	// EvFenced: the attempt fenced after an uncertain failure is proven stopped: its agent
	// acknowledged the cancel, or its lease has certainly expired. Reason says which.
	EvFenced
	// EvAbort: the shell cannot go on with the request (it lost ownership of it to another
	// gateway, the journal is unavailable, the gateway is shutting down). The current
	// attempt is cancelled and the request ends with Err; it is never rerun here.
	EvAbort
	// EvBoundaryRecorded answers ActRecordBoundary: Err is nil when the delivery boundary
	// is durable, otherwise the request ends with Err and nothing is delivered.
	EvBoundaryRecorded
	// EvRerunBudget answers ActTryRerun for Attempt: Granted when the pool's retry budget
	// allowed the rerun (and withdrew it), otherwise the request ends with
	// retry_budget_exhausted.
	EvRerunBudget
)

// Event is one input to Machine.Step. Only the fields its Kind names are read.
type Event struct {
	Kind    EventKind
	Attempt int
	Replica string
	Chunk   sse.Class
	Tokens  int
	Size    int
	// Finished is the bit set of choice indices 0..63 that this chunk finishes;
	// FinishedHigh counts finishing choices with a higher index.
	Finished     uint64
	FinishedHigh int
	Failure      FailureClass
	Reason       EndReason
	Err          *openai.Error
	// Dial marks an EvFailed in which no connection was made: the replica is not listening
	// and the request never reached it.
	Dial bool
	// Status is the HTTP status of an EvFailed in which the engine answered with an error
	// status instead of an answer (0: it did not).
	Status int
	// Fenceable marks an EvDispatched attempt that holds a worker-side lease (the replica
	// has an agent): if it becomes uncertain it can be proven stopped, and so rerun.
	Fenceable bool
	// Stalled marks an EvClientGone caused by the client accepting no bytes for the write
	// timeout.
	Stalled bool
	// Granted answers ActTryRerun (EvRerunBudget): the retry budget allowed the rerun.
	Granted bool
}
