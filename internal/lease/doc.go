// Package lease owns the arithmetic of attempt leases, on both ends of the wire.
//
// On the agent's side a Table holds the lease of every attempt the agent is
// proxying: it refuses an epoch that is not newer than the highest one seen for
// the same logical request, extends a live lease on renewal, never brings an
// expired lease back to life, and answers "may this attempt publish now?". On
// the gateway's side a Tracker holds the gateway's view of the leases it has
// granted on one agent: it hands out epochs that only grow, builds the batched
// renewal, applies renewal acks that may arrive late or out of order, and
// computes ExpiresBy, the time by which the agent's lease has certainly
// expired, which is what lets the gateway rerun an attempt whose replica it can
// no longer reach. The package also formats and parses the lease header.
//
// It is a pure core package: no network, no files, no goroutines, no clocks
// (the time is always passed in). It imports only the standard library and
// must never import any other fencegate package or anything that does I/O.
package lease
