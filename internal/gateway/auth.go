package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/limits"
	"github.com/fencegate/fencegate/internal/openai"
)

// apiKey is the identity behind a bearer key. The journal records ID, never the key.
type apiKey struct {
	ID    string
	Admin bool
	// models are the only models the key may use (nil: every model).
	models []string
	limits limits.Limits
	// traces is the key's own trace mode ("": the gateway's traces.mode).
	traces config.TraceMode
	// queue is the key's place in a full pool's queue (queueClass): its weight and
	// class, and which headers may change them.
	queue keyQueue
}

// mayUse reports whether the key may use model: to a key limited to some models, the
// others do not exist.
func (k apiKey) mayUse(model string) bool {
	return k.Admin || k.models == nil || slices.Contains(k.models, model)
}

// buildKeys indexes the configuration's keys by digest; a key written as key_sha256 is
// its digest already.
func buildKeys(a config.Auth) map[string]apiKey {
	keys := make(map[string]apiKey)
	for _, k := range a.Keys {
		keys[configDigest(k)] = apiKey{ID: k.ID, models: k.Models, traces: k.Traces,
			limits: limits.Limits{MaxConcurrent: int64(k.MaxConcurrent), RPM: int64(k.RPM), TPM: int64(k.TPM)},
			queue:  keyQueue{weight: k.Weight, priority: k.Priority, fairnessHeader: k.FairnessHeader, priorityHeader: k.PriorityHeader}}
	}
	for _, k := range a.AdminKeys {
		keys[configDigest(k)] = apiKey{ID: k.ID, Admin: true}
	}
	return keys
}

func configDigest(k config.APIKey) string {
	if k.Key != "" {
		return keyDigest(k.Key)
	}
	b, _ := hex.DecodeString(k.KeySHA256) // validated: 64 hex digits
	return string(b)
}

// keyDigest hashes a key so that lookups do not compare secrets byte by byte, and so that
// a key needs to be kept only as its hash.
func keyDigest(k string) string {
	sum := sha256.Sum256([]byte(k))
	return string(sum[:])
}

// storeKeys caches the keys kept in the store (`fencegate keys`). It is read again every
// auth.store_refresh, so a key revoked on one gateway is refused by every gateway that
// shares the store within that period; an unknown key also reads it again, at most once
// per missMinInterval, so that a key just created works at once without letting unknown
// keys hammer the store.
type storeKeys struct {
	mu sync.Mutex
	// keys: digest → identity of every valid key; any is true when the store holds a
	// key at all, revoked ones included (see authRequired); anyAdmin when it holds a valid
	// admin key (see hasAdminKey).
	keys     map[string]apiKey
	any      bool
	anyAdmin bool
	// loaded: the keys were read at least once (a gateway that started without its store
	// has not yet); loadedAt is when the last read began.
	loaded   bool
	loadedAt time.Time
	// missReadAt is when an unknown key last made the cache read the store.
	missReadAt time.Time
	// loading serialises reads of the store; a reader that waited for another's read
	// uses its result.
	loading sync.Mutex
}

// missMinInterval bounds the store reads that unknown keys cause.
const missMinInterval = time.Second

// RefreshKeys reads the store's API keys now. The gateway does it every auth.store_refresh;
// tests call it to make a key created or revoked elsewhere count at once.
func (s *Server) RefreshKeys(ctx context.Context) error {
	return s.loadStoreKeys(ctx, time.Time{})
}

// loadStoreKeys reads the keys unless a read that started after since has completed
// meanwhile (then its result stands).
func (s *Server) loadStoreKeys(ctx context.Context, since time.Time) error {
	sk := &s.storeKeys
	sk.loading.Lock()
	defer sk.loading.Unlock()
	sk.mu.Lock()
	fresh := !since.IsZero() && sk.loadedAt.After(since)
	sk.mu.Unlock()
	if fresh {
		return nil
	}
	started := s.now()
	list, err := s.store.ListKeys(ctx)
	if err != nil {
		return err
	}
	keys := make(map[string]apiKey, len(list))
	anyAdmin := false
	for _, k := range list {
		if k.Revoked() {
			continue
		}
		b, err := hex.DecodeString(k.KeySHA256)
		if err != nil {
			continue // the store validates hashes; a bad row names no key
		}
		keys[string(b)] = apiKey{ID: k.ID, Admin: k.Admin, models: k.Models, traces: config.TraceMode(k.Traces),
			limits: limits.Limits{MaxConcurrent: k.MaxConcurrent, RPM: k.RPM, TPM: k.TPM},
			queue:  keyQueue{weight: k.Weight, priority: k.Priority, fairnessHeader: k.FairnessHeader, priorityHeader: k.PriorityHeader}}
		anyAdmin = anyAdmin || k.Admin
	}
	sk.mu.Lock()
	sk.keys, sk.any, sk.anyAdmin, sk.loaded, sk.loadedAt = keys, len(list) > 0, anyAdmin, true, started
	sk.mu.Unlock()
	return nil
}

// refreshKeys is the background reader of the store's keys (every auth.store_refresh).
func (s *Server) refreshKeys(ctx context.Context) {
	if !s.current().cfg.Auth.UsesStoreKeys() {
		return
	}
	if err := s.RefreshKeys(ctx); err != nil && ctx.Err() == nil && !notConnected(err) {
		// The keys read last stay in force: a revoked key may live on while the store is
		// unreachable, a valid one is not refused for it.
		s.log.Warn("API keys not read from the store; keeping the ones read last", "err", err)
	}
}

// lookupStoreKey finds a key's digest among the store's keys, reading the store again on
// a miss unless a miss already did within missMinInterval.
func (s *Server) lookupStoreKey(ctx context.Context, digest string) (apiKey, bool) {
	sk := &s.storeKeys
	now := s.now()
	sk.mu.Lock()
	k, ok := sk.keys[digest]
	loadedAt := sk.loadedAt
	read := !ok && (sk.missReadAt.IsZero() || now.Sub(sk.missReadAt) >= missMinInterval)
	if read {
		sk.missReadAt = now
	}
	sk.mu.Unlock()
	if !read || !s.storeAnswers() {
		return k, ok
	}
	if err := s.loadStoreKeys(ctx, loadedAt); err != nil {
		s.log.Warn("API keys not read from the store", "err", err)
		return apiKey{}, false
	}
	sk.mu.Lock()
	k, ok = sk.keys[digest]
	sk.mu.Unlock()
	return k, ok
}

// authRequired reports whether requests need a key: some key is configured, or the store
// holds one. A store whose keys are all revoked still closes the gateway: revoking the last
// key must never open it to everyone.
func (s *Server) authRequired(l *live) bool {
	if len(l.keys) > 0 {
		return true
	}
	if !l.cfg.Auth.UsesStoreKeys() {
		return false
	}
	s.storeKeys.mu.Lock()
	defer s.storeKeys.mu.Unlock()
	return s.storeKeys.any
}

// storeKeysKnown reports whether the gateway knows the store's keys: it read them once, or
// they do not count (auth.store_keys: false). A gateway that started without its store
// reads them here as soon as the store answers, so that the first request after it comes
// does not wait for the next refresh.
func (s *Server) storeKeysKnown(ctx context.Context, l *live) bool {
	if !l.cfg.Auth.UsesStoreKeys() {
		return true
	}
	sk := &s.storeKeys
	sk.mu.Lock()
	loaded := sk.loaded
	sk.mu.Unlock()
	if loaded {
		return true
	}
	if !s.storeAnswers() {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, boundaryWriteTimeout)
	defer cancel()
	return s.loadStoreKeys(rctx, s.now()) == nil
}

// writeKeysUnavailable answers a request whose key the gateway cannot check: the store's
// keys were never read (the store has not been reachable since the gateway started), and
// the request's key is not in the configuration — or no key is, so that the gateway cannot
// tell whether it is open.
func (s *Server) writeKeysUnavailable(w http.ResponseWriter, r *http.Request) {
	s.writeStoreUnavailable(w, r, "the API keys kept in the store cannot be read yet (the store is not reachable), so this request's key cannot be checked; nothing was started", requestID(r))
}

// auth requires a known bearer key, a tenant's or an admin's, when keys are configured or
// stored.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		l := s.current()
		known := s.storeKeysKnown(r.Context(), l)
		if known && !s.authRequired(l) {
			h(w, r)
			return
		}
		c := s.identify(r, l)
		if !c.known && !known && (c.presented || !s.authRequired(l)) {
			// The key may be a stored one; without a key, the gateway may be open.
			s.writeKeysUnavailable(w, r)
			return
		}
		if !c.known {
			writeError(w, r, &openai.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "missing or invalid API key: send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>')", RequestID: requestID(r)})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), identityKey, c.key)))
	}
}

func identity(r *http.Request) (apiKey, bool) {
	id, ok := r.Context().Value(identityKey).(apiKey)
	return id, ok
}
