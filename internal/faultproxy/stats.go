package faultproxy

import (
	"context"
	"fmt"
)

// Stats counts what the proxy has done since Start. Byte counts are of payload only; a
// byte is counted as forwarded once the write to its receiver has returned. Pending bytes
// are those of connections still open: bytes pending when a connection ends are discarded
// with it and counted nowhere.
type Stats struct {
	UpstreamForwarded   int64 // bytes client → target written to the target
	UpstreamDropped     int64 // bytes client → target dropped by a black hole
	DownstreamForwarded int64 // bytes target → client written to the client
	DownstreamDropped   int64 // bytes target → client dropped by a black hole
	UpstreamPending     int64 // bytes client → target read but not yet forwarded or dropped
	DownstreamPending   int64 // bytes target → client read but not yet forwarded or dropped

	Accepted    int64 // connections accepted from clients
	Open        int   // accepted connections not yet closed on both sides
	DialFailed  int64 // accepted connections whose target could not be dialled (the client is reset)
	ResetByPeer int64 // connections reset because a read or write on one side failed, passed on to the other side
	ClosesHeld  int   // ends of stream (close or reset) read from one side and held by a black hole now
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statsLocked()
}

// statsLocked adds the bytes pending in open connections to the counters. Bytes pending
// in a connection that has ended were discarded with it, so they are no longer counted.
// The caller holds mu.
func (p *Proxy) statsLocked() Stats {
	s := p.stats
	for l := range p.links {
		up, down := l.pending()
		s.UpstreamPending += up
		s.DownstreamPending += down
	}
	return s
}

// Await blocks until cond holds for the proxy's Stats, ctx is done, or the proxy is
// closed, whichever is first. cond is called with the proxy's lock released, once now and
// again after every change. It lets a test wait for a fault to take effect ("the request's
// bytes were dropped", "every connection is gone") without sleeping.
func (p *Proxy) Await(ctx context.Context, cond func(Stats) bool) error {
	for {
		p.mu.Lock()
		s, wake, closing := p.statsLocked(), p.statsWake, p.closing
		p.mu.Unlock()
		if cond(s) {
			return nil
		}
		select {
		case <-wake:
		case <-closing:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("faultproxy: await stats (last %+v): %w", s, ctx.Err())
		}
	}
}

// wakeStatsLocked wakes every Await after a change of stats. The caller holds mu.
func (p *Proxy) wakeStatsLocked() {
	close(p.statsWake)
	p.statsWake = make(chan struct{})
}

// wakeStats wakes every Await after a change it cannot see in p.stats (bytes pending in a
// pipe are counted there).
func (p *Proxy) wakeStats() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeStatsLocked()
}

// count applies change to the stats and wakes every Await.
func (p *Proxy) count(change func(*Stats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change(&p.stats)
	p.wakeStatsLocked()
}

// add records n bytes travelling in dir as forwarded or dropped.
func (s *Stats) add(dir Direction, n int, dropped bool) {
	switch {
	case dir == Upstream && dropped:
		s.UpstreamDropped += int64(n)
	case dir == Upstream:
		s.UpstreamForwarded += int64(n)
	case dropped:
		s.DownstreamDropped += int64(n)
	default:
		s.DownstreamForwarded += int64(n)
	}
}
