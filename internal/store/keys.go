package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrKeyExists is returned by CreateKey when the id, or the key itself, is already
// stored (revoked keys included: an id is never reused).
var ErrKeyExists = errors.New("store: api key already exists")

// ErrKeyNotFound is returned by RevokeKey for an id that is not stored.
var ErrKeyNotFound = errors.New("store: api key not found")

// APIKey is an API key managed in the store (`fencegate keys`). The key itself is never
// stored: KeySHA256 is the hex SHA-256 of it, which is what a gateway compares a bearer
// key's digest with.
type APIKey struct {
	ID        string
	KeySHA256 string
	// Models are the only models the key may use; none: every model.
	Models []string
	// MaxConcurrent, RPM and TPM limit the key (0: no limit): requests at once, requests
	// per minute, output tokens per minute.
	MaxConcurrent int64
	RPM           int64
	TPM           int64
	// Traces is the key's trace mode, which its requests follow instead of the gateway's
	// traces.mode: off, errors or all; "": the gateway's.
	Traces string
	// Admin keys reach the operator's calls (/admin/*, pprof, the full /readyz and
	// /metrics) and read every request; tenant keys reach /v1/* only.
	Admin bool
	// Weight, Priority, FairnessHeader and PriorityHeader are the key's place in a full
	// pool's queue, as config.APIKey has them (docs/design.md §3, "The queue"); the
	// gateway reads a weight of 0 as 1 (keys stored before these existed have 1).
	Weight         int
	Priority       int
	FairnessHeader bool
	PriorityHeader bool
	CreatedAt      time.Time
	// RevokedAt is when the key was revoked; zero while it is valid.
	RevokedAt time.Time
}

// Revoked reports whether the key was revoked.
func (k APIKey) Revoked() bool { return !k.RevokedAt.IsZero() }

// The bounds of a key's priority class (config.MinPriority, config.MaxPriority; the store
// does not import the configuration).
const (
	minPriority = -100
	maxPriority = 100
)

// maxKeyID bounds an id: it is a label in logs and metrics.
const maxKeyID = 128

func (k APIKey) validate() error {
	switch {
	case k.ID == "":
		return errors.New("empty id")
	case len(k.ID) > maxKeyID:
		return fmt.Errorf("id longer than %d bytes", maxKeyID)
	case k.CreatedAt.IsZero():
		return errors.New("zero CreatedAt")
	case k.MaxConcurrent < 0 || k.RPM < 0 || k.TPM < 0:
		return errors.New("negative limit")
	case k.Weight < 0:
		return errors.New("negative weight")
	case k.Priority < minPriority || k.Priority > maxPriority:
		return fmt.Errorf("priority %d outside [%d, %d]", k.Priority, minPriority, maxPriority)
	}
	if b, err := hex.DecodeString(k.KeySHA256); err != nil || len(b) != 32 || hex.EncodeToString(b) != k.KeySHA256 {
		return errors.New("KeySHA256 is not 64 lower-case hex digits")
	}
	if slices.Contains(k.Models, "") {
		return errors.New("empty model name")
	}
	switch k.Traces {
	case "", "off", "errors", "all":
	default:
		return fmt.Errorf("traces %q is not off, errors or all (or empty: the gateway's mode)", k.Traces)
	}
	return nil
}

// KeyStore is where API keys live; every Store is one. It is separate from the journal's
// methods only to keep each list short.
type KeyStore interface {
	// CreateKey stores a new key. It fails with ErrKeyExists when the id or the hash is
	// taken, by a valid or a revoked key.
	CreateKey(ctx context.Context, k APIKey) error
	// ListKeys returns every key, revoked ones included, ordered by id.
	ListKeys(ctx context.Context) ([]APIKey, error)
	// RevokeKey revokes the key id at time at. Revoking a revoked key changes nothing
	// (the first time is kept); an unknown id is ErrKeyNotFound.
	RevokeKey(ctx context.Context, id string, at time.Time) error
}

const (
	keyColumns   = `id, key_sha256, models, max_concurrent, rpm, tpm, created_at, revoked_at, traces, admin, weight, priority, fairness_header, priority_header`
	insertKeySQL = `INSERT INTO api_keys (` + keyColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING`
	selectKeySQL = `SELECT ` + keyColumns + ` FROM api_keys ORDER BY id`
	revokeKeySQL = `UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at = 0`
	keyExistsSQL = `SELECT id FROM api_keys WHERE id = $1`
)

func encodeModels(models []string) string {
	if models == nil {
		models = []string{}
	}
	b, _ := json.Marshal(models)
	return string(b)
}

// CreateKey implements KeyStore.
func (s *sqlStore) CreateKey(ctx context.Context, k APIKey) error {
	if err := k.validate(); err != nil {
		return fmt.Errorf("store: %s: create key %q: %w", s.name, k.ID, err)
	}
	var n int64
	err := s.b.inTx(ctx, func(tx sqlQuerier) error {
		var err error
		n, err = tx.exec(ctx, insertKeySQL, k.ID, k.KeySHA256, encodeModels(k.Models), k.MaxConcurrent, k.RPM, k.TPM,
			toNanos(k.CreatedAt), toNanos(k.RevokedAt), k.Traces, k.Admin, int64(k.Weight), int64(k.Priority), k.FairnessHeader, k.PriorityHeader)
		return err
	})
	if err == nil && n == 0 {
		err = ErrKeyExists
	}
	if err != nil {
		return fmt.Errorf("store: %s: create key %q: %w", s.name, k.ID, err)
	}
	return nil
}

// ListKeys implements KeyStore.
func (s *sqlStore) ListKeys(ctx context.Context) ([]APIKey, error) {
	rows, err := s.b.reader().query(ctx, selectKeySQL)
	if err != nil {
		return nil, fmt.Errorf("store: %s: list keys: %w", s.name, err)
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		var (
			k                  APIKey
			models             string
			created, revokedAt int64
		)
		var weight, priority int64
		if err := rows.Scan(&k.ID, &k.KeySHA256, &models, &k.MaxConcurrent, &k.RPM, &k.TPM, &created, &revokedAt, &k.Traces, &k.Admin,
			&weight, &priority, &k.FairnessHeader, &k.PriorityHeader); err != nil {
			return nil, fmt.Errorf("store: %s: scan key: %w", s.name, err)
		}
		k.Weight, k.Priority = int(weight), int(priority)
		if err := json.Unmarshal([]byte(models), &k.Models); err != nil {
			return nil, fmt.Errorf("store: %s: key %q: models: %w", s.name, k.ID, err)
		}
		if len(k.Models) == 0 {
			k.Models = nil
		}
		k.CreatedAt, k.RevokedAt = fromNanos(created), fromNanos(revokedAt)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: list keys: %w", s.name, err)
	}
	return out, nil
}

// RevokeKey implements KeyStore.
func (s *sqlStore) RevokeKey(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("store: %s: revoke key %q: zero time", s.name, id)
	}
	err := s.b.inTx(ctx, func(tx sqlQuerier) error {
		n, err := tx.exec(ctx, revokeKeySQL, id, toNanos(at))
		if err != nil || n == 1 {
			return err
		}
		var found string
		switch err := tx.queryRow(ctx, keyExistsSQL, id).Scan(&found); {
		case errors.Is(err, errNoRows):
			return ErrKeyNotFound
		case err != nil:
			return err
		}
		return nil // revoked already
	})
	if err != nil {
		return fmt.Errorf("store: %s: revoke key %q: %w", s.name, id, err)
	}
	return nil
}

// CreateKey implements KeyStore.
func (m *Memory) CreateKey(ctx context.Context, k APIKey) error {
	if err := k.validate(); err != nil {
		return fmt.Errorf("store: create key %q: %w", k.ID, err)
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for _, o := range m.apiKeys {
		if o.ID == k.ID || o.KeySHA256 == k.KeySHA256 {
			return fmt.Errorf("store: create key %q: %w", k.ID, ErrKeyExists)
		}
	}
	if m.apiKeys == nil {
		m.apiKeys = make(map[string]APIKey)
	}
	k.Models = slices.Clone(k.Models)
	if len(k.Models) == 0 {
		k.Models = nil
	}
	k.CreatedAt, k.RevokedAt = normTime(k.CreatedAt), normTime(k.RevokedAt)
	m.apiKeys[k.ID] = k
	return nil
}

// ListKeys implements KeyStore.
func (m *Memory) ListKeys(ctx context.Context) ([]APIKey, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]APIKey, 0, len(m.apiKeys))
	for _, k := range m.apiKeys {
		k.Models = slices.Clone(k.Models)
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b APIKey) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// RevokeKey implements KeyStore.
func (m *Memory) RevokeKey(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("store: revoke key %q: zero time", id)
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	k, ok := m.apiKeys[id]
	if !ok {
		return fmt.Errorf("store: revoke key %q: %w", id, ErrKeyNotFound)
	}
	if !k.Revoked() {
		k.RevokedAt = normTime(at)
		m.apiKeys[id] = k
	}
	return nil
}
