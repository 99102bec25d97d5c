// Package upstream is the HTTP transport from the gateway to replicas: the tuned client, and
// the classification of every way an upstream call can fail into the failure classes of the
// failover core (dead, uncertain, overloaded, rejected) or "the client went away".
// A transport error is dead only when it proves the engine stopped or never got the
// request; anything else is uncertain, because the attempt may still be decoding (see
// ClassifyError and docs/design.md §3).
//
// It performs I/O (it is part of the shell) and may import the core packages, never the
// gateway.
package upstream
