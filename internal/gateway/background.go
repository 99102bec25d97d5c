package gateway

import (
	"context"
	"time"
)

// sweepEvery is the period of the deletion of expired journal rows.
const sweepEvery = time.Minute

// every calls f each period until ctx ends (the first call after one period).
func every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f(ctx)
	}
}

// renewOwner extends this gateway's ownership of its running requests; it runs every
// third of the owner lease, so that one or two failed renewals do not let another gateway
// take a healthy request over.
func (s *Server) renewOwner(ctx context.Context) {
	lease := s.boot.Idempotency.OwnerLease.D()
	rctx, cancel := context.WithTimeout(ctx, lease/3)
	defer cancel()
	// A store never reached holds no request of this gateway: nothing to renew, and its
	// own retries say that it is down.
	if _, err := s.store.RenewOwner(rctx, s.gatewayID, s.now().Add(lease)); err != nil && ctx.Err() == nil && !notConnected(err) {
		s.log.Warn("owner lease renewal failed", "gateway", s.gatewayID, "err", err)
	}
}

// sweep deletes journal rows (and so idempotency keys) past their retention.
func (s *Server) sweep(ctx context.Context) {
	if n, err := s.store.Sweep(ctx, s.now()); err != nil {
		if ctx.Err() == nil && !notConnected(err) {
			s.log.Warn("journal sweep failed", "err", err)
		}
	} else if n > 0 {
		s.log.Info("journal sweep", "deleted", n)
	}
}
