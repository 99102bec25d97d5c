// Package agent is the fencegate agent: a sidecar on an inference engine's
// host that enforces attempt leases in front of an unmodified engine (vLLM,
// SGLang, TGI, llama.cpp server, the simulator, any OpenAI-compatible
// server). A replica that is cut off from the gateway but still alive keeps
// decoding; the agent is what stops it, so the gateway can prove an attempt
// silent and rerun it. The package owns the agent's HTTP surface, the proxying
// of data requests with a lease check before every event, the per-attempt
// expiry timer, the control endpoints, the cached engine-load scrape and the
// `fencegate agent` command line; the lease arithmetic itself lives in package
// lease. It is part of the shell: it may import the core packages (lease, sse,
// openai) but must never import the gateway, upstream, store or failover
// packages, nor the simulator outside tests.
//
// # Data requests
//
// POST /v1/chat/completions, /v1/completions, /v1/messages, /v1/responses
// and /v1/embeddings take the engine's own body, plus these request headers:
//
//	X-Fencegate-Attempt: req_<ULID>.a<N>       attempt id; the logical request id is the part before the last ".a"
//	X-Fencegate-Lease:   epoch=<uint64>;ttl_ms=<int>
//	X-Fencegate-Gateway: <gateway id>
//
// The lease starts when the agent receives the request: expiry = receipt time
// + ttl. An epoch not greater than the highest the agent has seen for the same
// logical request (including one named by an earlier cancel) is refused with
// 409 {"error":{"code":"stale_lease_epoch",...}} and the engine is not called;
// a newer epoch supersedes every older lease of the same logical request. The
// request goes to the engine on a kept-alive connection that carries it
// alone until its response ends (a stream to a generic engine on one closed
// after it), with the X-Fencegate-* headers removed except
// X-Fencegate-Attempt (and, with --engine-kind sglang, "rid":"<attempt id>"
// set in the JSON body). The engine's response comes back as the engine wrote
// it, except that:
//
//   - a stream (text/event-stream: every API's, named events included) is
//     split into events and the lease is checked before each event is
//     forwarded;
//   - any other response (a whole answer, embeddings, an error) is read
//     whole and the lease is checked before it is written;
//   - when the lease has expired or was revoked, the agent aborts the engine
//     request (closes that engine connection, and with sglang also POSTs
//     {"rid":"<attempt id>"} to {engine}/abort_request) and ends the
//     downstream response at once by closing the connection: never a clean
//     end, never [DONE];
//   - a timer fires at the lease's expiry, so an engine that has gone silent
//     is aborted too, not only one that sends the next event.
//
// A data request without X-Fencegate-Lease is proxied unfenced, like every
// other path (GET /v1/models, /health, /metrics, POST /tokenize, ...).
//
// # The secret
//
// With a secret configured (--secret-file) every request must carry
// X-Fencegate-Agent-Key: <secret>, compared in constant time, or is refused
// 401: data requests and passthrough included, since the agent is the only way
// to its engine, which listens on localhost only. The file may hold two
// secrets, one per line, either accepted, and is read again every 10 s and on
// SIGHUP, so that the secret is rotated without a restart (docs/design.md §4). The header is never
// forwarded to the engine. The one exception is GET /fencegate/v1/health, the
// agent's own probe of the engine's GET /health (200 or 503, nothing of the
// caller reaches the engine), for orchestrator probes that cannot carry a
// secret. Without a secret, control calls are accepted from loopback clients
// only (403 otherwise), data requests from anyone, and the agent logs a
// warning at start.
//
// # Control endpoints
//
// POST /fencegate/v1/renew renews a batch of leases and doubles as the
// gateway's heartbeat. It never touches the engine: the load it reports comes
// from a background scrape of the engine's /metrics.
//
//	→ {"gateway":"gw-1","ttl_ms":3000,"leases":[{"attempt":"req_X.a1","epoch":7}]}
//	← {"agent_time_ms":1736..., "results":[{"attempt":"req_X.a1","status":"renewed"}],
//	   "engine":{"up":true,"running":2,"waiting":0,"kv_usage":0.13,"scraped_at_ms":1736...},
//	   "fingerprint":{"served_model":"sim-model","block_size":"16","content_sha256":"9f2c…",...}}
//
// A status is renewed (expiry is now receipt time + ttl), unknown, revoked
// (cancelled or superseded), expired (never renewed back to life), ended or
// stale_epoch (the agent holds the attempt at a newer epoch).
//
// POST /fencegate/v1/cancel revokes one lease and aborts its engine request.
//
//	→ {"attempt":"req_X.a1","epoch":7}
//	← {"acked":true,"attempt":"req_X.a1","ended_at_ms":1736...}
//
// The ack is sent only once the engine request has ended: the proxy has
// finished and closed the engine connection, so nothing more of the attempt
// can reach the gateway. An attempt the agent does not hold acks at once with
// "unknown":true (and its epoch is remembered, so its data request is refused
// if it arrives later); one that has already ended with "already_ended":true;
// a cancel naming an older epoch than the one held with "stale_epoch":true. If
// the engine request has not ended within the cancel wait (10 s), the reply is
// 504 {"error":{"code":"cancel_timeout",...}}.
//
// GET /fencegate/v1/attempts lists the live attempts (?ended=1 adds recently
// ended ones): epoch, expiry, revoked, events and bytes forwarded.
//
// # Metrics
//
// GET /fencegate/v1/metrics (with the secret) is the agent's own Prometheus
// metrics: requests by kind, leases granted and active, attempts ended by
// reason, refusals. With --metrics-listen ADDR a second listener serves, with
// no secret, GET /metrics (the same) and GET /engine/metrics (the engine's own
// /metrics, proxied), and nothing else.
package agent
