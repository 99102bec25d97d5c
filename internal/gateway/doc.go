// Package gateway is the HTTP front of fencegate: it accepts OpenAI-compatible requests,
// runs the failover state machine of each one against the replicas of its pool, streams
// upstream events to the client, and journals what happened.
//
// It is the shell around the pure core (failover, balance, sse, openai): every decision is
// the core's; this package performs I/O, owns goroutines and reads the clock.
package gateway
