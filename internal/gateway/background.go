package gateway

import (
	"context"
	"time"
)

// sweepEvery is the period of the deletion of expired journal rows.
const sweepEvery = time.Minute

// ownerLoop renews this gateway's ownership of its running requests every third of the
// owner lease, so that one or two failed renewals do not let another gateway take a
// healthy request over.
func (s *Server) ownerLoop(ctx context.Context) {
	lease := s.cfg.Idempotency.OwnerLease.D()
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, lease/3)
		if _, err := s.store.RenewOwner(rctx, s.gatewayID, s.now().Add(lease)); err != nil && ctx.Err() == nil {
			s.log.Warn("owner lease renewal failed", "gateway", s.gatewayID, "err", err)
		}
		cancel()
	}
}

// sweepLoop deletes journal rows (and so idempotency keys) past their retention.
func (s *Server) sweepLoop(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := s.store.Sweep(ctx, s.now()); err != nil && ctx.Err() == nil {
			s.log.Warn("journal sweep failed", "err", err)
		} else if n > 0 {
			s.log.Info("journal sweep", "deleted", n)
		}
	}
}
