package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Memory is a Store kept in process memory, for tests of the packages that
// use a store. It follows the same rules as the SQL stores (the shared
// conformance suite in storetest checks this) but keeps nothing across
// restarts. Safe for concurrent use.
type Memory struct {
	mu       sync.Mutex
	requests map[string]*Request           // by id; Attempts unused here
	keys     map[tenantKey]string          // (tenant, idempotency key) -> request id
	attempts map[string]map[string]Attempt // request id -> attempt id -> attempt
	traces   map[string]map[int64]TraceEvent
	closed   bool

	// byResponse indexes the non-empty ResponseIDs (response id -> request
	// ids), so FindByResponseID does not scan every request.
	byResponse map[string]map[string]struct{}

	// apiKeys are the API keys (KeyStore), by id.
	apiKeys map[string]APIKey
}

type tenantKey struct{ tenant, key string }

var _ Store = (*Memory)(nil)

// NewMemory returns an empty memory store.
func NewMemory() *Memory {
	return &Memory{
		requests:   make(map[string]*Request),
		keys:       make(map[tenantKey]string),
		byResponse: make(map[string]map[string]struct{}),
		attempts:   make(map[string]map[string]Attempt),
		traces:     make(map[string]map[int64]TraceEvent),
	}
}

var errClosed = errors.New("store: closed")

func (m *Memory) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	return nil
}

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, c Claim) (ClaimResult, error) {
	row, err := c.prepare()
	if err != nil {
		return ClaimResult{}, err
	}
	if err := m.lock(); err != nil {
		return ClaimResult{}, err
	}
	defer m.mu.Unlock()

	if row.IdempotencyKey == "" {
		if _, dup := m.requests[row.ID]; dup {
			return ClaimResult{}, fmt.Errorf("store: claim %s: request id already exists", row.ID)
		}
		m.insertLocked(row)
		return ClaimResult{Status: ClaimNew, Request: m.getLocked(row.ID)}, nil
	}

	k := tenantKey{row.Tenant, row.IdempotencyKey}
	id, exists := m.keys[k]
	if exists {
		existing := m.requests[id]
		switch v := judgeClaim(existing, row.BodyHash, c.Now); v {
		case verdictExpired:
			m.deleteLocked(id)
		case verdictMarkInterrupted:
			existing.Outcome = OutcomeInterrupted
			existing.Phase = PhaseDone
			existing.UpdatedAt = normTime(c.Now)
			return ClaimResult{Status: v.status(), Request: m.getLocked(id)}, nil
		case verdictTakeover:
			existing.Owner = row.Owner
			existing.OwnerLeaseUntil = normTime(row.OwnerLeaseUntil)
			existing.UpdatedAt = normTime(c.Now)
			return ClaimResult{Status: v.status(), Request: m.getLocked(id)}, nil
		default:
			return ClaimResult{Status: v.status(), Request: m.getLocked(id)}, nil
		}
	}
	if _, dup := m.requests[row.ID]; dup {
		return ClaimResult{}, fmt.Errorf("store: claim %s: request id already exists", row.ID)
	}
	m.insertLocked(row)
	return ClaimResult{Status: ClaimNew, Request: m.getLocked(row.ID)}, nil
}

func (m *Memory) insertLocked(r Request) {
	r.normalize()
	if r.IdempotencyKey != "" {
		m.keys[tenantKey{r.Tenant, r.IdempotencyKey}] = r.ID
	}
	m.indexResponseLocked(r.ResponseID, r.ID)
	m.requests[r.ID] = r.clone()
}

func (m *Memory) indexResponseLocked(responseID, id string) {
	if responseID == "" {
		return
	}
	ids := m.byResponse[responseID]
	if ids == nil {
		ids = make(map[string]struct{})
		m.byResponse[responseID] = ids
	}
	ids[id] = struct{}{}
}

func (m *Memory) unindexResponseLocked(responseID, id string) {
	ids := m.byResponse[responseID]
	delete(ids, id)
	if len(ids) == 0 {
		delete(m.byResponse, responseID)
	}
}

func (m *Memory) deleteLocked(id string) {
	r, ok := m.requests[id]
	if !ok {
		return
	}
	if r.IdempotencyKey != "" {
		delete(m.keys, tenantKey{r.Tenant, r.IdempotencyKey})
	}
	m.unindexResponseLocked(r.ResponseID, id)
	delete(m.requests, id)
	delete(m.attempts, id)
	delete(m.traces, id)
}

// getLocked returns a deep copy of a request with its attempts by N.
func (m *Memory) getLocked(id string) *Request {
	r, ok := m.requests[id]
	if !ok {
		return nil
	}
	c := r.clone()
	c.Attempts = nil
	for _, a := range m.attempts[id] {
		c.Attempts = append(c.Attempts, a)
	}
	slices.SortFunc(c.Attempts, func(a, b Attempt) int { return cmp.Compare(a.N, b.N) })
	return c
}

// Apply implements Store.
func (m *Memory) Apply(ctx context.Context, muts []Mutation) error {
	for i, mu := range muts {
		if err := ValidateMutation(mu); err != nil {
			return fmt.Errorf("store: apply: mutation %d: %w", i, err)
		}
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for _, mu := range muts {
		switch mu := mu.(type) {
		case CreateRequest:
			if _, dup := m.requests[mu.Request.ID]; dup {
				continue
			}
			if mu.Request.IdempotencyKey != "" {
				if _, dup := m.keys[tenantKey{mu.Request.Tenant, mu.Request.IdempotencyKey}]; dup {
					continue
				}
			}
			m.insertLocked(mu.Request)
		case UpdateRequest:
			if r, ok := m.requests[mu.ID]; ok {
				prev := r.ResponseID
				applyUpdate(r, &mu)
				if r.ResponseID != prev {
					m.unindexResponseLocked(prev, r.ID)
					m.indexResponseLocked(r.ResponseID, r.ID)
				}
			}
		case UpsertAttempt:
			a := mu.Attempt
			a.StartedAt, a.EndedAt = normTime(a.StartedAt), normTime(a.EndedAt)
			byID := m.attempts[a.RequestID]
			if byID == nil {
				byID = make(map[string]Attempt)
				m.attempts[a.RequestID] = byID
			}
			if prev, ok := byID[a.ID]; ok {
				a = mergeAttempt(prev, a)
			}
			byID[a.ID] = a
		case AddTrace:
			e := mu.Event
			e.At = normTime(e.At)
			e.Payload = cloneBytes(e.Payload)
			bySeq := m.traces[e.RequestID]
			if bySeq == nil {
				bySeq = make(map[int64]TraceEvent)
				m.traces[e.RequestID] = bySeq
			}
			if _, dup := bySeq[e.Seq]; !dup {
				bySeq[e.Seq] = e
			}
		}
	}
	return nil
}

// MarkFirstDelta implements Store.
func (m *Memory) MarkFirstDelta(ctx context.Context, requestID, owner string, at time.Time) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, ok := m.requests[requestID]
	switch {
	case !ok:
		return fmt.Errorf("store: mark first delta %s: %w", requestID, ErrNotFound)
	case r.Owner != owner || !at.Before(r.OwnerLeaseUntil):
		return fmt.Errorf("store: mark first delta %s for %s: %w", requestID, owner, ErrNotOwner)
	}
	markFirstDelta(r, at)
	return nil
}

// markFirstDelta is the Go model of the boundary record: the latch and the
// first time it was set.
func markFirstDelta(r *Request, at time.Time) {
	if !r.FirstDeltaSent {
		r.FirstDeltaSent = true
		r.FirstDeltaAt = normTime(at)
	}
	if r.Phase == PhaseQueued || r.Phase == PhaseRouting {
		r.Phase = PhaseStreaming // the boundary record is also the phase it reached
	}
	if at := normTime(at); at.After(r.UpdatedAt) {
		r.UpdatedAt = at
	}
}

// RenewOwner implements Store.
func (m *Memory) RenewOwner(ctx context.Context, owner string, until time.Time) (int64, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	until = normTime(until)
	var n int64
	for _, r := range m.requests {
		if r.Owner == owner && r.Outcome == OutcomeRunning {
			if until.After(r.OwnerLeaseUntil) {
				r.OwnerLeaseUntil = until
			}
			n++
		}
	}
	return n, nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, requestID string) (*Request, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	r := m.getLocked(requestID)
	if r == nil {
		return nil, fmt.Errorf("store: get %s: %w", requestID, ErrNotFound)
	}
	return r, nil
}

// FindByResponseID implements Store.
func (m *Memory) FindByResponseID(ctx context.Context, responseID string) (*Request, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var best *Request
	for id := range m.byResponse[responseID] {
		r := m.requests[id]
		if best == nil || r.CreatedAt.After(best.CreatedAt) || (r.CreatedAt.Equal(best.CreatedAt) && r.ID > best.ID) {
			best = r
		}
	}
	if best == nil {
		return nil, fmt.Errorf("store: find response %s: %w", responseID, ErrNotFound)
	}
	return m.getLocked(best.ID), nil
}

// Traces implements Store.
func (m *Memory) Traces(ctx context.Context, requestID string) ([]TraceEvent, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]TraceEvent, 0, len(m.traces[requestID]))
	for _, e := range m.traces[requestID] {
		e.Payload = cloneBytes(e.Payload)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b TraceEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Sweep implements Store.
func (m *Memory) Sweep(ctx context.Context, now time.Time) (int64, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	var n int64
	for id, r := range m.requests {
		if !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
			m.deleteLocked(id)
			n++
		}
	}
	return n, nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Recent implements Store.
func (m *Memory) Recent(ctx context.Context, q RecentQuery) ([]*Request, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []*Request
	for id := range m.requests {
		if r := m.getLocked(id); q.matches(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Request) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out[:min(len(out), q.limit())], nil
}
