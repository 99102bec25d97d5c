// Package limits counts what each API key uses — requests running at once, requests per
// minute, output tokens per minute — and decides whether a key's next request may start.
//
// Two backends count: Local, in the gateway's memory (each gateway counts on its own), and
// Redis, shared by every gateway that points at the same Redis, so that a key's limits hold
// across them. A Limiter puts one in front of the other: while Redis is unreachable it
// either goes on with the local counts (fail open) or refuses keys that have limits (fail
// closed).
//
// # Windows
//
// Per-minute limits are sliding-window counters: a key has a counter per fixed minute, and
// its use "in the last minute" is the current minute's count plus the previous minute's,
// weighted by how much of the previous minute the last 60 s still cover. A fixed window
// alone would let a key spend its limit at the end of one minute and again at the start of
// the next (twice the limit within a second); a log of every request's time would be exact
// but cost memory and Redis work per request. The weighted pair costs two counters per key
// and limit, is one atomic script in Redis, assumes requests were spread evenly over the
// previous minute, and never admits more than the limit within any minute that starts at a
// window edge.
//
// Tokens are counted when a request ends, from the output tokens delivered to its client;
// a request starts while the key's token use is below its limit, so a single long answer
// can take a key past it, and the next requests wait until the window has slid far enough.
//
// # Concurrency
//
// Local counts running requests in memory. Redis keeps, per key, a sorted set of running
// request ids scored by a lease deadline: a gateway refreshes the deadlines of its running
// requests every third of the lease, and every admission first drops members whose
// deadline passed. A gateway that dies without releasing its requests therefore holds
// their slots for one lease at most.
//
// Time is always passed in (now): the package reads no clock except in the refresh loop a
// Limiter runs, whose clock is injectable.
package limits
