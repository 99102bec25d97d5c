// Package gateway is the HTTP front of fencegate: it routes and authenticates requests,
// admits them under their keys' limits, parses and claims them, and hands each to its owner
// (internal/request), which runs its failover machine against the replicas of its pool and
// streams the answer. Around the requests it keeps the pools (replica health, load,
// fingerprints, the retry budget), their discovery, probes, scrapes and canaries, the agent
// links, the admin calls, drain, reload and the metrics.
//
// It is the shell around the pure core (failover, balance, sse, openai): every decision is
// the core's; this package performs I/O, owns goroutines and reads the clock. It reaches a
// running request only through the request package's API: Attempt.ReplicaLost and
// Run.Shutdown, which post to the request's inbox (docs/design.md §6).
package gateway
