//go:build race

package request

import (
	"bytes"
	"runtime"
	"strconv"
)

// ownerGoroutine is the goroutine that owns a request (docs/design.md §6): the one that
// built it and runs Serve. check panics when any other goroutine touches the request's
// state, as the HTTP/2 server's serveG does for its connection. It is on in builds with
// -race, which is how the tests run; other builds compile it to nothing (owner_norace.go),
// since reading a goroutine's id costs a stack trace.
type ownerGoroutine uint64

func newOwnerGoroutine() ownerGoroutine { return ownerGoroutine(goroutineID()) }

func (g ownerGoroutine) check() {
	if id := goroutineID(); id != uint64(g) {
		panic("request: state of a request touched by goroutine " + strconv.FormatUint(id, 10) +
			", not its owner " + strconv.FormatUint(uint64(g), 10))
	}
}

// goroutineID reads the running goroutine's id from the first line of its stack trace,
// "goroutine 4707 [running]:".
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("request: no goroutine id in the stack trace: " + err.Error())
	}
	return id
}
