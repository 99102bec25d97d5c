package storetest

import (
	"context"
	"testing"
	"time"
)

// RetryGate is a store.DeferredOptions.Wait that hands each wait to the test and returns
// when the test releases it, so a deferred store retries exactly when the test says and
// nothing depends on time.
type RetryGate struct {
	delays  chan time.Duration
	release chan struct{}
}

// NewRetryGate returns a gate with no wait begun.
func NewRetryGate() *RetryGate {
	return &RetryGate{delays: make(chan time.Duration), release: make(chan struct{})}
}

// Wait is the store's wait: it reports d to Next, then blocks until Release or ctx ends.
func (g *RetryGate) Wait(ctx context.Context, d time.Duration) error {
	select {
	case g.delays <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Next returns the delay of the next wait, once it has begun; the test fails when none
// begins before the test's context ends.
func (g *RetryGate) Next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-g.delays:
		return d
	case <-t.Context().Done():
		t.Fatal("the store was not tried again")
		return 0
	}
}

// Release ends the wait that has begun: the store tries again.
func (g *RetryGate) Release() { g.release <- struct{}{} }
