package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/store"
)

// releaseLease ends the lease side of an attempt on an agent. A completed attempt's lease
// is simply forgotten. A cancelled one is fenced: no more renewals, and the agent is asked
// to cancel it (the data connection is already closed, but through a partition the agent
// may not see that). When the machine waits for the fence (awaitFence), EvFenced follows on
// the agent's ack or, at the latest, when the lease has certainly expired.
func (rn *run) releaseLease(a *attempt, cancelled, awaitFence bool) {
	if !cancelled {
		a.link.forget(a.id)
		return
	}
	expires := a.link.fence(a.id)
	var once sync.Once
	fenced := func(reason string, acked bool) {
		once.Do(func() {
			rn.mu.Lock()
			if acked {
				a.rec.CancelAcked = true
				rn.s.journal.Submit(store.UpsertAttempt{Attempt: a.rec})
			}
			if awaitFence && !rn.m.Done() {
				rn.step(failover.Event{Kind: failover.EvFenced, Attempt: a.n, Reason: reason})
				rn.flush()
				rn.checkClient()
			}
			rn.mu.Unlock()
			a.link.forget(a.id)
		})
	}
	timer := time.AfterFunc(expires.Sub(rn.s.now()), func() { fenced("lease_expired", false) })
	ctx, cancel := context.WithDeadline(context.Background(), expires)
	go func() {
		defer cancel()
		if a.link.cancel(ctx, a.id, a.epoch) {
			timer.Stop()
			fenced("cancel_acked", true)
		}
	}()
}
