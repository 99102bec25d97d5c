package request

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
// may not see that). When the machine waits for the fence (awaitFence), ctlFenced reaches
// the owner on the agent's ack or, at the latest, when the lease has certainly expired.
//
// The ack and the expiry arrive on their own goroutines, after the owner may have finished;
// they only post to the owner's inbox and journal the ack, never touch the request.
func (rn *Run) releaseLease(a *Attempt, cancelled, awaitFence bool) {
	rn.owner.check()
	ag := a.agent
	if !cancelled {
		ag.Forget(a.id)
		return
	}
	expires := ag.Fence(a.id)
	journal, box, id, epoch := rn.srv.Journal(), rn.inbox, a.id, a.epoch
	ackRec := store.Attempt{ID: a.rec.ID, RequestID: a.rec.RequestID, N: a.rec.N, CancelAcked: true}
	var once sync.Once
	fenced := func(reason failover.EndReason) {
		once.Do(func() {
			if awaitFence {
				box.post(control{kind: ctlFenced, a: a, reason: reason})
			}
			ag.Forget(id)
		})
	}
	timer := time.AfterFunc(expires.Sub(rn.now()), func() { fenced(failover.FencedLeaseExpired) })
	ctx, cancel := context.WithDeadline(context.Background(), expires)
	go func() {
		defer cancel()
		if ag.Cancel(ctx, id, epoch) {
			timer.Stop()
			journal.Submit(store.UpsertAttempt{Attempt: ackRec})
			fenced(failover.FencedCancelAcked)
		}
	}()
}
