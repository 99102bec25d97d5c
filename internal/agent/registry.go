package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
)

// register starts attempt at's lease and makes it live. It fails, leaving
// nothing behind, when the epoch is stale or the agent is closing. It returns
// the running attempts the new epoch has superseded (an older epoch of the same
// attempt id, or another attempt of the same logical request) so the caller
// can abort them at once rather than at their next event or expiry.
func (a *Agent) register(at *attempt, ttl time.Duration) (superseded []*attempt, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errAgentClosed
	}
	a.sweepLocked(at.started)
	if err := a.table.Start(at.id, at.epoch, ttl, at.started); err != nil {
		return nil, err
	}
	at.lease = a.table.Ref(at.id)
	superseded = a.supersededLocked(at.id, at.epoch)
	a.setLiveLocked(at)
	at.timer = time.AfterFunc(a.untilExpiryLocked(at), func() { a.checkExpiry(at) })
	a.notifyLocked()
	return superseded, nil
}

// supersededLocked returns the live attempts of attemptID's logical request
// whose epoch is below epoch.
func (a *Agent) supersededLocked(attemptID string, epoch uint64) []*attempt {
	var out []*attempt
	for _, at := range a.liveByRequest[lease.RequestOf(attemptID)] {
		if at.epoch < epoch {
			out = append(out, at)
		}
	}
	return out
}

// setLiveLocked makes at the live attempt of its id, in place of any before it.
func (a *Agent) setLiveLocked(at *attempt) {
	req := lease.RequestOf(at.id)
	if old := a.live[at.id]; old != nil {
		a.unindexLocked(req, old)
	}
	a.live[at.id] = at
	a.liveByRequest[req] = append(a.liveByRequest[req], at)
}

// unindexLocked takes at out of its request's live attempts.
func (a *Agent) unindexLocked(req string, at *attempt) {
	s := a.liveByRequest[req]
	if i := slices.Index(s, at); i >= 0 {
		s = slices.Delete(s, i, i+1)
	}
	if len(s) == 0 {
		delete(a.liveByRequest, req)
		return
	}
	a.liveByRequest[req] = s
}

// abort stops attempt at: cancelling its context closes the engine connection,
// and a past write deadline releases a downstream write blocked on a gateway
// that stopped reading (the connection is being abandoned anyway). The proxy
// then finishes on its own. The first cause wins; aborting a finished attempt
// does nothing.
func (a *Agent) abort(at *attempt, cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at.finished {
		return
	}
	at.cancel(cause)
	_ = at.rc.SetWriteDeadline(time.Unix(1, 0)) // only valid while the handler runs: hence under mu, before finished
}

// finish ends attempt at once its proxy is done: the engine connection is
// closed by the caller before, reason says why it ended. It records the end,
// wakes WaitEnded and cancel waiters, and stops the expiry timer.
func (a *Agent) finish(at *attempt, reason string) {
	at.cancel(errFinished)
	if a.cfg.EngineKind == KindSGLang && reason != EndFinished && reason != EndBadRequest {
		a.abortSGLang(at.id)
	}
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	at.finished = true
	at.endedAt = now
	at.endReason = reason
	at.timer.Stop()
	if a.live[at.id] == at {
		// Only the current holder of the id ends the lease: a superseded
		// attempt must not end its successor's.
		delete(a.live, at.id)
		a.unindexLocked(lease.RequestOf(at.id), at)
		a.table.End(at.id)
	}
	a.ended[at.id] = a.infoLocked(at)
	a.endedFIFO = append(a.endedFIFO, endedRef{at.id, now})
	if len(a.endedFIFO) > maxEndedInfos {
		old := a.endedFIFO[0]
		a.endedFIFO = a.endedFIFO[1:]
		if info := a.ended[old.id]; info.EndedAt.Equal(old.at) {
			delete(a.ended, old.id) // unless the id ended again since
		}
	}
	close(at.done)
	a.notifyLocked()
	a.metrics.attemptEnded(reason)
}

// notifyLocked wakes everyone waiting for an attempt to start or end.
func (a *Agent) notifyLocked() {
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// sweepLocked forgets long-expired leases, at most every sweepEvery.
func (a *Agent) sweepLocked(now time.Time) {
	if now.Sub(a.lastSweep) < sweepEvery {
		return
	}
	a.lastSweep = now
	a.table.Sweep(now, leaseRetain)
}

// infoLocked describes at; the caller holds a.mu.
func (a *Agent) infoLocked(at *attempt) AttemptInfo {
	info := AttemptInfo{
		Attempt:         at.id,
		Gateway:         at.gateway,
		Epoch:           at.epoch,
		Path:            at.path,
		Started:         at.started,
		Ended:           at.finished,
		EndedAt:         at.endedAt,
		EndReason:       at.endReason,
		EngineStatus:    int(at.engineStatus.Load()),
		EventsForwarded: at.events.Load(),
		BytesForwarded:  at.bytes.Load(),
	}
	if e, ok := a.table.Lookup(at.id); ok && e.Epoch == at.epoch {
		info.ExpiresAt = e.ExpiresAt
		info.Revoked = e.Revoked || e.Superseded
	} else {
		info.Revoked = true // the table holds a newer epoch: this one was superseded
	}
	return info
}

// Attempts returns the attempts whose proxy is running, oldest first.
func (a *Agent) Attempts() []AttemptInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]AttemptInfo, 0, len(a.live))
	for _, at := range a.live {
		out = append(out, a.infoLocked(at))
	}
	sortInfos(out)
	return out
}

// recentlyEnded returns the attempts that ended recently, oldest first.
func (a *Agent) recentlyEnded() []AttemptInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]AttemptInfo, 0, len(a.ended))
	for _, info := range a.ended {
		out = append(out, info)
	}
	sortInfos(out)
	return out
}

func sortInfos(infos []AttemptInfo) {
	slices.SortFunc(infos, func(x, y AttemptInfo) int {
		if c := x.Started.Compare(y.Started); c != 0 {
			return c
		}
		return cmp.Compare(x.Attempt, y.Attempt)
	})
}

// WaitEnded blocks until attempt has ended (its engine request is over and
// its connection closed) and returns its final info. It waits for an attempt
// the agent has not seen yet, too, so a test can call it before its request
// arrives. It is woken by every start and end, never by polling.
func (a *Agent) WaitEnded(ctx context.Context, attempt string) (AttemptInfo, error) {
	for {
		a.mu.Lock()
		if info, ok := a.ended[attempt]; ok {
			if at := a.live[attempt]; at == nil {
				a.mu.Unlock()
				return info, nil
			}
		}
		if a.changed == nil {
			a.changed = make(chan struct{})
		}
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return AttemptInfo{}, fmt.Errorf("agent: waiting for attempt %s to end: %w", attempt, ctx.Err())
		}
	}
}
