// Package sse owns the hot path of every streamed answer: it splits the bytes an
// engine sends into server-sent events, classifies each event (comment, output,
// finish, usage, error, [DONE], malformed) by scanning its JSON rather than
// decoding it, and builds the few events the gateway writes itself. Events are
// handed out as slices of the bytes received so they can be forwarded exactly as
// the engine wrote them, and nothing is allocated per event once the decoder's
// buffer has grown to the stream's working size. It is a pure core package: it
// imports only the standard library and internal/enginetool (a table that imports
// nothing), must never import net, os, time-based clocks, or any other fencegate
// package, and it starts no goroutines.
package sse
