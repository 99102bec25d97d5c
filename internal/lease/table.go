package lease

import (
	"errors"
	"fmt"
	"time"
)

// ErrStaleEpoch is returned by Table.Start when the epoch is not greater than
// the highest epoch the table has seen for the same logical request.
var ErrStaleEpoch = errors.New("lease: epoch is not newer than the highest seen for this request")

// Table is the agent's set of leases, keyed by attempt id. The zero value is
// ready to use. It is not safe for concurrent use: the agent guards it with
// its own lock, and checks it before publishing every event.
//
// Three rules make it a fence rather than a timer:
//   - Epochs only grow per logical request. Start refuses an epoch that is not
//     greater than the highest seen for the request (so a reused or delayed
//     older attempt is refused), and a lease whose epoch is below that highest
//     is superseded: it is no longer valid, even before it expires.
//   - Final is final. A revoked, ended or expired lease never becomes valid
//     again, whatever renewal arrives afterwards (a late renewal cannot revive
//     a lease the gateway has already counted as dead).
//   - A revoke raises the request's highest epoch even for an attempt the
//     table does not hold, so a data request that arrives after its own
//     cancel is refused.
type Table struct {
	leases   map[string]*held          // by attempt id
	requests map[string]*requestEpochs // by logical request id
}

// held is one lease in the Table.
type held struct {
	epoch   uint64
	expires time.Time
	revoked bool
	ended   bool
	// req is the record of the lease's logical request, for its highest epoch. It is
	// the table's record for as long as the lease can be valid: Sweep forgets a record
	// only once every lease of its request has been expired for retain.
	req *requestEpochs
}

// A Ref names one lease the Table holds, so that the holder of an attempt can check it
// again without looking it up by id: the agent checks before every batch of events it
// forwards. The zero Ref names no lease and is never valid.
type Ref struct{ h *held }

// requestEpochs remembers the highest epoch seen for one logical request.
type requestEpochs struct {
	highest uint64
	// keepUntil is the latest expiry of any of the request's leases; Sweep
	// keeps the record until retain after it. Zero for a record made by
	// Revoke alone, which Sweep stamps the first time it sees it.
	keepUntil time.Time
}

// Entry is a copy of one lease, for listings.
type Entry struct {
	Attempt   string
	Epoch     uint64
	ExpiresAt time.Time
	// Revoked is true when a cancel revoked the lease.
	Revoked bool
	// Superseded is true when a newer epoch of the same logical request has
	// been seen (started or named by a cancel).
	Superseded bool
	Ended      bool
}

func (t *Table) init() {
	if t.leases == nil {
		t.leases = make(map[string]*held)
		t.requests = make(map[string]*requestEpochs)
	}
}

// Start begins the lease of attempt at epoch, valid until now+ttl. It returns
// an error wrapping ErrStaleEpoch when epoch is 0 or not greater than the
// highest epoch seen for the attempt's logical request; the table is then
// unchanged. Starting a newer epoch supersedes every older lease of the same
// logical request, including an older epoch of the same attempt id.
func (t *Table) Start(attempt string, epoch uint64, ttl time.Duration, now time.Time) error {
	t.init()
	req := RequestOf(attempt)
	r := t.requests[req]
	if r == nil {
		r = &requestEpochs{}
	}
	if epoch == 0 || epoch <= r.highest {
		return fmt.Errorf("attempt %s epoch %d (highest seen %d): %w", attempt, epoch, r.highest, ErrStaleEpoch)
	}
	expires := now.Add(ttl)
	r.highest = epoch
	r.keepUntil = later(r.keepUntil, expires)
	t.requests[req] = r
	t.leases[attempt] = &held{epoch: epoch, expires: expires, req: r}
	return nil
}

// Ref returns the lease the table holds for attempt now (the zero Ref when none). Taken
// right after a Start, it names that lease for good.
func (t *Table) Ref(attempt string) Ref { return Ref{t.leases[attempt]} }

// ValidRef is Valid for the lease ref names, at epoch. While that lease is the one the
// table holds for its attempt, it answers as Valid does; once another took the attempt
// id — a newer epoch, which supersedes it, or the same epoch started again after a
// Sweep forgot this one long expired — it is never valid again, where Valid would speak
// of the newer lease.
func (t *Table) ValidRef(ref Ref, epoch uint64, now time.Time) bool {
	h := ref.h
	return h != nil && h.epoch == epoch && !h.revoked && !h.ended &&
		now.Before(h.expires) && h.req.highest <= h.epoch
}

// Renew extends a live lease to now+ttl (never shortening it) and returns
// Renewed, or says why it did not: Unknown (no lease for this attempt, or one
// at an epoch the table never saw), StaleEpoch (the table holds the attempt
// at a newer epoch), Ended, Revoked (cancelled or superseded) or Expired. A
// lease is expired from the instant now reaches its expiry.
func (t *Table) Renew(attempt string, epoch uint64, ttl time.Duration, now time.Time) Status {
	h := t.leases[attempt]
	switch {
	case h == nil || epoch > h.epoch:
		return Unknown
	case epoch < h.epoch:
		return StaleEpoch
	case h.ended:
		return Ended
	case h.revoked || t.superseded(attempt, h):
		return Revoked
	case !now.Before(h.expires):
		return Expired
	}
	h.expires = later(h.expires, now.Add(ttl))
	r := t.requests[RequestOf(attempt)]
	r.keepUntil = later(r.keepUntil, h.expires)
	return Renewed
}

// Revoke withdraws the lease of attempt at epoch: from now on Valid reports
// false for it. It raises the logical request's highest epoch to epoch, so
// even an attempt the table does not hold yet can never start at that epoch
// (its delayed data request is refused). It returns Revoked, Unknown (nothing
// held: the tombstone still applies), StaleEpoch (the table holds the attempt
// at a newer epoch, which is left alone) or Ended.
func (t *Table) Revoke(attempt string, epoch uint64) Status {
	t.init()
	req := RequestOf(attempt)
	r := t.requests[req]
	if r == nil {
		r = &requestEpochs{}
		t.requests[req] = r
	}
	r.highest = max(r.highest, epoch)
	h := t.leases[attempt]
	switch {
	case h == nil:
		return Unknown
	case epoch < h.epoch:
		return StaleEpoch
	case h.ended:
		return Ended
	}
	h.revoked = true
	return Revoked
}

// Valid reports whether attempt may publish at time now under epoch: the
// table holds it at exactly that epoch, it is not revoked, superseded or
// ended, and now is strictly before its expiry.
func (t *Table) Valid(attempt string, epoch uint64, now time.Time) bool {
	h := t.leases[attempt]
	return h != nil && h.epoch == epoch && !h.revoked && !h.ended &&
		now.Before(h.expires) && !t.superseded(attempt, h)
}

// ExpiresAt returns the current expiry of attempt's lease, whatever its state.
func (t *Table) ExpiresAt(attempt string) (time.Time, bool) {
	h := t.leases[attempt]
	if h == nil {
		return time.Time{}, false
	}
	return h.expires, true
}

// End records that attempt's engine request has finished. The lease stays in
// the table (answering Ended) until Sweep forgets it.
func (t *Table) End(attempt string) {
	if h := t.leases[attempt]; h != nil {
		h.ended = true
	}
}

// Lookup returns a copy of attempt's lease.
func (t *Table) Lookup(attempt string) (Entry, bool) {
	h := t.leases[attempt]
	if h == nil {
		return Entry{}, false
	}
	return Entry{
		Attempt:    attempt,
		Epoch:      h.epoch,
		ExpiresAt:  h.expires,
		Revoked:    h.revoked,
		Superseded: t.superseded(attempt, h),
		Ended:      h.ended,
	}, true
}

// Len returns the number of leases held, ended ones included.
func (t *Table) Len() int { return len(t.leases) }

// Sweep forgets leases that expired more than retain before now, whatever
// their state, and the epoch records of logical requests none of whose leases
// is younger than that. A forgotten lease is not valid, so sweeping can only
// ever stop an attempt, never let one publish. retain should be long (minutes):
// it is how long a delayed data request with an old epoch is still refused.
func (t *Table) Sweep(now time.Time, retain time.Duration) (removed int) {
	for id, h := range t.leases {
		if !now.Before(h.expires.Add(retain)) {
			delete(t.leases, id)
			removed++
		}
	}
	for req, r := range t.requests {
		if r.keepUntil.IsZero() {
			r.keepUntil = now // a tombstone from Revoke: keep it for retain from now
			continue
		}
		if !now.Before(r.keepUntil.Add(retain)) {
			delete(t.requests, req)
		}
	}
	return removed
}

// superseded reports whether a newer epoch has been seen for h's logical
// request (by Start of another attempt, or by Revoke).
func (t *Table) superseded(attempt string, h *held) bool {
	r := t.requests[RequestOf(attempt)]
	return r != nil && r.highest > h.epoch
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
