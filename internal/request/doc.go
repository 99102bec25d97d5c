// Package request runs one logical request from its parsed body to its last byte: the owner
// loop of docs/design.md §6. One goroutine, the HTTP handler's, owns each request (Run): it
// alone steps the request's failover machine, writes to its client and touches its journal
// record. Everything else reports to it — each attempt's upstream reader over a channel, and
// the deadline timer, the client leaving, fence acks, heartbeat loss, the admin endpoint,
// drain and the tokenize call through its inbox — so no lock is held across I/O and no
// sender ever waits for the owner. Builds with -race check it (ownerGoroutine).
//
// A Run is three parts, each owning one concern: the loop and its attempts (Run, Attempt,
// the reader), the response shaper (what each event becomes for the client: held and
// rewritten bytes, sequence numbers, stripped usage, tool call ids) and the recorder (the
// journal, the trace document, the spans, the metrics, the End the access log reads).
//
// What it needs from the gateway comes through two interfaces: Server, the services all
// requests share, and Pool, the operations on its model's pool (with the Agent a pick may
// carry). It must never import internal/gateway, which imports it.
package request
