// Package upstream is the HTTP transport from the gateway to replicas: Client, an HTTP/1.1
// client of its own that never resends a request, reads responses in the caller's
// goroutine and says of every failure how much of the request was written; NewClient,
// net/http's client tuned for engines, which the gateway uses until Client replaces it;
// and the classification of every way an upstream call can fail into the failure classes
// of the failover core (dead, uncertain, overloaded, rejected) or "the client went away".
// A transport error is dead only when it proves the engine stopped or never got the
// request; anything else is uncertain, because the attempt may still be decoding (see
// ClassifyError and docs/design.md §3, §6).
//
// It performs I/O (it is part of the shell) and may import the core packages, never the
// gateway.
package upstream
