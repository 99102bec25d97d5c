//go:build !race

package request

// ownerGoroutine is the goroutine that owns a request; its check is on only in builds
// with -race (owner_race.go). Here it is empty, and check compiles to nothing.
type ownerGoroutine struct{}

func newOwnerGoroutine() ownerGoroutine { return ownerGoroutine{} }

func (ownerGoroutine) check() {}
