// Package store owns the durable request journal of fencegate: logical
// requests, their attempts, idempotency keys, owner leases and optional event
// traces, kept in SQLite (the embedded default), PostgreSQL (several gateways
// sharing one database) or memory (tests). It answers the question an outage
// asks — may this input be sent to another replica, and what did the client
// already see? — in a way that survives a gateway crash: Claim decides
// atomically what a request carrying an Idempotency-Key may do,
// MarkFirstDelta durably records the delivery boundary before it is crossed,
// and Journal batches every other write off the token path. The package is
// shell code: it does I/O, and it imports no other fencegate package (not
// the gateway, upstream or agent, nor the core); the gateway depends on it,
// never the reverse. Its subpackage storetest is the conformance suite
// every implementation passes.
package store
