// Package failover is the per-request failover state machine: the heart of fencegate.
//
// A Machine owns one logical request. The HTTP shell feeds it events (Step) with the current
// time and performs the actions it returns, in order. The machine decides when an attempt
// starts, which upstream events reach the client, when the delivery boundary is crossed (the
// one-way "committed" latch), whether a failed attempt may be rerun (shouldRerun, one function,
// checks in a documented order), and how the request ends (exactly one terminal action).
//
// It is pure: no network, no files, no goroutines, no clocks. It must never import the shell
// (gateway, upstream, store) or anything that does I/O.
package failover
