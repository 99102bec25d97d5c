// Package store owns the durable request journal of fencegate: logical
// requests, their attempts, idempotency keys, owner leases and optional event
// traces, kept in SQLite (the embedded default), PostgreSQL (several gateways
// sharing one database) or memory (tests). It answers the question an outage
// asks — may this input be sent to another replica, and what did the client
// already see? — in a way that survives a gateway crash: Claim decides
// atomically what a request carrying an Idempotency-Key may do,
// MarkFirstDelta durably records the delivery boundary before it is crossed,
// and Journal batches every other write off the token path. The package is
// shell code: it may do I/O, but it must never import the gateway, upstream,
// agent or any other shell package, nor the core packages' internals; the
// gateway depends on it, never the reverse.
package store
