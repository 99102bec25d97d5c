//go:build race

package request

import "testing"

// With -race, a request's state touched by any goroutine but its owner panics.
func TestOwnerGoroutineCheck(t *testing.T) {
	g := newOwnerGoroutine()
	g.check() // the owner itself
	recovered := make(chan any)
	go func() {
		defer func() { recovered <- recover() }()
		g.check()
	}()
	if r := <-recovered; r == nil {
		t.Fatal("another goroutine passed the owner check")
	}
}
