package lease

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Lease is one attempt's lease as the gateway holds it; a renewal carries a
// list of them. The JSON names are those of the agent's renew endpoint.
type Lease struct {
	Attempt string `json:"attempt"`
	Epoch   uint64 `json:"epoch"`
}

// TrackerConfig holds a Tracker's timings. Zero fields get the defaults.
type TrackerConfig struct {
	// TTL is the lease TTL sent with every grant and renewal. Default DefaultTTL.
	TTL time.Duration
	// DriftMargin is added to every ExpiresBy. Default DefaultDriftMargin.
	DriftMargin time.Duration
	// MaxDelivery bounds how long after being sent a lease message (the data
	// request or a renewal) can still be received by the agent; see
	// Tracker.ExpiresBy. Default 0: a message that arrives at all is assumed
	// to arrive within DriftMargin, as on a loopback or data-centre network.
	// Set it when the network may hold a request longer (a partition that
	// heals and then delivers a retransmitted renewal), together with a
	// renewal timeout no longer than it on the gateway's client.
	MaxDelivery time.Duration
	// HeartbeatTimeout is how long without any renewal ack makes
	// HeartbeatFailed report true. Default DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
}

func (c TrackerConfig) withDefaults() (TrackerConfig, error) {
	switch {
	case c.TTL < 0:
		return c, fmt.Errorf("lease: TrackerConfig.TTL is negative (%v)", c.TTL)
	case c.TTL > MaxTTL:
		return c, fmt.Errorf("lease: TrackerConfig.TTL %v is above MaxTTL %v", c.TTL, MaxTTL)
	case c.DriftMargin < 0:
		return c, fmt.Errorf("lease: TrackerConfig.DriftMargin is negative (%v)", c.DriftMargin)
	case c.MaxDelivery < 0:
		return c, fmt.Errorf("lease: TrackerConfig.MaxDelivery is negative (%v)", c.MaxDelivery)
	case c.HeartbeatTimeout < 0:
		return c, fmt.Errorf("lease: TrackerConfig.HeartbeatTimeout is negative (%v)", c.HeartbeatTimeout)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.DriftMargin == 0 {
		c.DriftMargin = DefaultDriftMargin
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	return c, nil
}

// Tracker is the gateway's view of the leases it holds on one agent. It is not
// safe for concurrent use: the gateway guards each agent's Tracker with a lock.
//
// # Why ExpiresBy is what it is
//
// The agent sets a lease's expiry to (its receipt time of the data request or
// of a renewal) + TTL, and a lease that has expired, was revoked or ended is
// never valid again. The gateway never sees the agent's receipt times, so it
// bounds them:
//
//   - A renewal that has been acked was received before its ack arrived: the
//     agent read it, then replied. So the ack time, not the send time, is the
//     upper bound of its receipt (the send time is a lower bound, useless
//     here: a renewal that sat in a socket buffer for 400 ms extended the lease
//     to 400 ms past send+TTL).
//   - A renewal that was sent but not acked may still have been received, and
//     may have extended the lease. It must count even though no reply came:
//     a lost reply looks the same as a lost request. Its receipt is bounded by
//     its send time + MaxDelivery, the longest a message can take to reach the
//     agent (with the default 0, DriftMargin absorbs the ordinary delay).
//   - The data request that started the lease counts the same way, from the
//     grant time.
//
// Each message the agent applied moved the expiry to at most (its receipt) +
// TTL, and the expiry is the latest of those, so
//
//	ExpiresBy = max(grant + MaxDelivery,
//	                latest ack time of an acked renewal that included the attempt,
//	                latest send time of an unacked renewal that included it + MaxDelivery)
//	            + TTL + DriftMargin
//
// DriftMargin covers the two clocks running at slightly different rates (a few
// microseconds per TTL) and, mostly, the agent's expiry timer firing late.
// After Fence no renewal includes the attempt, so ExpiresBy stops moving. When
// an ack reports the lease final (expired, revoked, ended, superseded), the
// lease was already dead when the agent read that renewal, so ExpiresBy
// becomes that ack's time if it is earlier.
type Tracker struct {
	epochs *Epochs
	cfg    TrackerConfig

	leases  map[string]*tracked
	pending map[uint64]*pendingRenewal // sent renewals that included leases and are not acked yet

	seq       uint64    // the last renewal sequence number handed out
	firstSent time.Time // when the first renewal was sent
	lastAck   time.Time // latest ack time of any renewal
	everAcked bool
}

// tracked is one attempt's lease as the gateway sees it.
type tracked struct {
	epoch   uint64
	granted time.Time
	fenced  bool

	ackBase time.Time // latest ack time of an acked renewal that included it
	unacked []uint64  // sequence numbers of unacked renewals that included it, ascending

	status    Status // the newest status an ack reported (by sequence number)
	statusSeq uint64

	final   bool      // some ack reported a final status
	finalAt time.Time // the earliest such ack's time
}

// pendingRenewal is a renewal sent and not acked.
type pendingRenewal struct {
	sent   time.Time
	leases []Lease // as carried, so an ack is applied to the epoch it was about
}

// NewTracker returns an empty Tracker drawing epochs from epochs.
func NewTracker(epochs *Epochs, cfg TrackerConfig) (*Tracker, error) {
	if epochs == nil {
		return nil, fmt.Errorf("lease: NewTracker needs an Epochs counter")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Tracker{
		epochs:  epochs,
		cfg:     cfg,
		leases:  make(map[string]*tracked),
		pending: make(map[uint64]*pendingRenewal),
	}, nil
}

// Config returns the tracker's timings, defaults filled in.
func (t *Tracker) Config() TrackerConfig { return t.cfg }

// TTL returns the TTL to send with grants (in the lease header) and renewals.
func (t *Tracker) TTL() time.Duration { return t.cfg.TTL }

// Grant starts tracking a lease for attempt, sent at now, and returns its new
// epoch. Granting an attempt id again gives it a newer epoch; what is known of
// the older one still bounds ExpiresBy, since its lease may still be live.
func (t *Tracker) Grant(attempt string, now time.Time) (epoch uint64) {
	epoch = t.epochs.Next()
	old := t.leases[attempt]
	tr := &tracked{epoch: epoch, granted: now}
	if old != nil {
		tr.ackBase = old.ackBase
		tr.unacked = old.unacked
		if old.granted.After(now) {
			tr.granted = old.granted
		}
	}
	t.leases[attempt] = tr
	return epoch
}

// Epoch returns the epoch granted to attempt.
func (t *Tracker) Epoch(attempt string) (uint64, bool) {
	tr := t.leases[attempt]
	if tr == nil {
		return 0, false
	}
	return tr.epoch, true
}

// RenewalSent records a renewal sent at now and returns its sequence number
// and the leases it carries: every lease that is not fenced and not known to
// be final. A renewal with no leases is still a heartbeat. Leases are sorted
// by attempt id so the body is deterministic.
func (t *Tracker) RenewalSent(now time.Time) (seq uint64, leases []Lease) {
	t.seq++
	seq = t.seq
	if seq == 1 {
		t.firstSent = now
	}
	for id, tr := range t.leases {
		if tr.fenced || tr.final {
			continue
		}
		leases = append(leases, Lease{Attempt: id, Epoch: tr.epoch})
	}
	slices.SortFunc(leases, func(a, b Lease) int { return cmp.Compare(a.Attempt, b.Attempt) })
	if len(leases) > 0 {
		for _, l := range leases {
			tr := t.leases[l.Attempt]
			tr.unacked = append(tr.unacked, seq)
		}
		t.pending[seq] = &pendingRenewal{sent: now, leases: slices.Clone(leases)}
	}
	return seq, leases
}

// RenewalAcked applies the agent's reply to renewal seq, received at ackAt.
// results maps attempt ids to the statuses the agent reported; an attempt the
// renewal carried but results omit counts as Unknown. Acks may arrive late,
// twice or out of order: an ack of an older renewal never moves a lease's
// state backwards (its status is replaced only by a newer renewal's, a final
// status is never replaced, and ack times only raise bounds). An ack of a
// sequence number never sent is ignored.
func (t *Tracker) RenewalAcked(seq uint64, ackAt time.Time, results map[string]Status) {
	if seq == 0 || seq > t.seq {
		return
	}
	if !t.everAcked || ackAt.After(t.lastAck) {
		t.lastAck = ackAt
	}
	t.everAcked = true
	p := t.pending[seq]
	if p == nil {
		return // no leases, or already acked
	}
	delete(t.pending, seq)
	for _, l := range p.leases {
		tr := t.leases[l.Attempt]
		if tr == nil {
			continue
		}
		if i, found := slices.BinarySearch(tr.unacked, seq); found {
			tr.unacked = slices.Delete(tr.unacked, i, i+1)
		}
		tr.ackBase = later(tr.ackBase, ackAt)
		if l.Epoch == tr.epoch { // a status about an older grant says nothing of this one
			tr.noteStatus(seq, results[l.Attempt], ackAt)
		}
	}
}

// noteStatus applies one reported status. The newest renewal's status wins,
// except that a final status is never replaced: the agent never revives a
// final lease, so a non-final status can only come from an older renewal the
// agent read earlier. Unknown is never final: the data request may still be on
// its way.
func (tr *tracked) noteStatus(seq uint64, st Status, ackAt time.Time) {
	if st.Final() && (!tr.final || ackAt.Before(tr.finalAt)) {
		tr.final = true
		tr.finalAt = ackAt
	}
	switch {
	case tr.status.Final() && !st.Final():
	case st.Final() && !tr.status.Final(), seq > tr.statusSeq:
		tr.status = st
		tr.statusSeq = seq
	}
}

// Fence stops renewing attempt: no later renewal carries it, so ExpiresBy
// stops moving. Fencing is one-way.
func (t *Tracker) Fence(attempt string) {
	if tr := t.leases[attempt]; tr != nil {
		tr.fenced = true
	}
}

// Fenced reports whether attempt has been fenced.
func (t *Tracker) Fenced(attempt string) bool {
	tr := t.leases[attempt]
	return tr != nil && tr.fenced
}

// ExpiresBy returns the time by which the agent's lease of attempt has
// certainly expired (see Tracker for the derivation). For an attempt that is
// still renewed the answer moves forward with every renewal; after Fence it is
// fixed, apart from falling to an ack time when an ack reports the lease
// final. It returns the zero time for an attempt the tracker does not hold.
func (t *Tracker) ExpiresBy(attempt string) time.Time {
	tr := t.leases[attempt]
	if tr == nil {
		return time.Time{}
	}
	base := tr.granted.Add(t.cfg.MaxDelivery)
	base = later(base, tr.ackBase)
	if n := len(tr.unacked); n > 0 {
		base = later(base, t.pending[tr.unacked[n-1]].sent.Add(t.cfg.MaxDelivery))
	}
	by := base.Add(t.cfg.TTL + t.cfg.DriftMargin)
	if tr.final && tr.finalAt.Before(by) {
		return tr.finalAt
	}
	return by
}

// Status returns the newest status the agent reported for attempt (Unknown
// before any ack), and whether the lease is known to be final: the agent
// reported it expired, revoked, ended or superseded. A final lease can never
// publish again.
func (t *Tracker) Status(attempt string) (st Status, final bool) {
	tr := t.leases[attempt]
	if tr == nil {
		return Unknown, false
	}
	return tr.status, tr.final
}

// HeartbeatAge returns the time since the last ack of any renewal. Before the
// first ack it is the time since the first renewal was sent (0 before that):
// an agent that has never answered is as silent as one that stopped.
func (t *Tracker) HeartbeatAge(now time.Time) time.Duration {
	switch {
	case t.everAcked:
		return max(0, now.Sub(t.lastAck))
	case t.seq > 0:
		return max(0, now.Sub(t.firstSent))
	}
	return 0
}

// HeartbeatFailed reports whether HeartbeatAge exceeds HeartbeatTimeout: the
// agent is to be judged unreachable.
func (t *Tracker) HeartbeatFailed(now time.Time) bool {
	return t.HeartbeatAge(now) > t.cfg.HeartbeatTimeout
}

// Remove forgets attempt, once the gateway no longer needs its ExpiresBy.
func (t *Tracker) Remove(attempt string) {
	tr := t.leases[attempt]
	if tr == nil {
		return
	}
	delete(t.leases, attempt)
	for _, seq := range tr.unacked {
		p := t.pending[seq]
		if p == nil {
			continue
		}
		p.leases = slices.DeleteFunc(p.leases, func(l Lease) bool { return l.Attempt == attempt })
		if len(p.leases) == 0 {
			delete(t.pending, seq)
		}
	}
}

// Len returns the number of leases tracked, fenced ones included.
func (t *Tracker) Len() int { return len(t.leases) }
