// Package h1server serves HTTP/1.1 on the gateway's plaintext listeners, in place of
// net/http's server, so that an open stream costs what the stream needs and no more
// (docs/design.md, "The client's server").
//
// net/http's server keeps, for every connection with a running handler, a second
// goroutine blocked in a read (to notice a client that leaves), a 4 KiB reader and two
// writers of 2 and 4 KiB, whether or not the stream has anything to say. Thousands of
// quiet streams (a long prefill, a slow decode, an agent waiting on a tool) then hold
// thousands of goroutines and buffers. Here a connection is one goroutine, the one that
// runs its handler; it holds a read buffer only while a request's head or body is being
// read, and a write buffer only between a handler's write and the flush that sends it.
// A client that leaves is noticed by one goroutine for the whole process, which waits in
// epoll for the peer's FIN or reset on every connection with a request running and
// cancels that request's context, as net/http's background read does.
//
// The common request head is read by readHeadFast, which copies it once (head.go); any
// other is parsed by net/http's own http.ReadRequest, and handlers are the same
// http.Handlers: the response writer supports Flush, FlushError and the read and write
// deadlines http.ResponseController sets. What it does not do, the gateway never needs:
// TLS and HTTP/2 (a TLS listener keeps net/http), hijacking, trailers and pipelined
// requests answered out of order (pipelined requests are answered one after another).
package h1server
