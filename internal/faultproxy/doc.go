// Package faultproxy is a TCP proxy for tests that stands between two parties on loopback
// (gateway and agent, agent and engine) and injects the network faults fencegate must
// survive: a one-way or two-way black hole (a partition with both hosts alive), a reset of
// every open connection, added latency, and a refused listener (a dead host). Faults are
// switched on and off in-process while connections stay open, and Stats plus Await let a
// test wait for a fault to have taken effect instead of sleeping.
//
// It is our own rather than github.com/Shopify/toxiproxy/v2 (v2.5.0), which was checked and
// does not fit cleanly: an in-process proxy needs its ApiServer, and the module brings
// zerolog, gorilla/mux, urfave/cli and the unmaintained tomb.v1 into the build; its
// reset_peer toxic resets a connection only when the next chunk arrives, so an idle
// connection cannot be reset on demand; disabling a proxy closes every open connection as
// well as the listener; and byte counts exist only as Prometheus metrics.
//
// It is test tooling: it may import only the standard library and must never import any
// fencegate package, so that every package's tests can use it.
package faultproxy
