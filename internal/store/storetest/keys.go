package storetest

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// API keys managed in the store (`fencegate keys`): the gateway reads them back from
// every gateway that shares the store, so what one handle writes another must see.

func hash(c byte) string { return strings.Repeat(string(c), 64) }

func apiKey(id string, c byte) store.APIKey {
	return store.APIKey{ID: id, KeySHA256: hash(c), CreatedAt: t0}
}

func mustListKeys(t *testing.T, s store.Store) []store.APIKey {
	t.Helper()
	keys, err := s.ListKeys(ctx(t))
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	return keys
}

func assertKeys(t *testing.T, what string, got, want []store.APIKey) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.CreatedAt.Equal(w.CreatedAt) || !g.RevokedAt.Equal(w.RevokedAt) {
			t.Errorf("%s: key %d times %v/%v, want %v/%v", what, i, g.CreatedAt, g.RevokedAt, w.CreatedAt, w.RevokedAt)
		}
		g.CreatedAt, g.RevokedAt, w.CreatedAt, w.RevokedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: key %d = %+v, want %+v", what, i, g, w)
		}
	}
}

func testKeysRoundTrip(t *testing.T, b Backend) {
	s := b.New(t)
	assertKeys(t, "empty store", mustListKeys(t, s), nil)
	limited := store.APIKey{ID: "team-b", KeySHA256: hash('b'), Models: []string{"llama-3-8b", "qwen, 7b"},
		MaxConcurrent: 4, RPM: 600, TPM: 100000, Traces: "errors", CreatedAt: t0.Add(time.Second)}
	plain := apiKey("team-a", 'a')
	traced := store.APIKey{ID: "team-c", KeySHA256: hash('c'), Traces: "all", CreatedAt: t0}
	untraced := store.APIKey{ID: "team-d", KeySHA256: hash('d'), Traces: "off", CreatedAt: t0}
	ops := store.APIKey{ID: "ops", KeySHA256: hash('e'), Admin: true, CreatedAt: t0}
	queued := store.APIKey{ID: "team-e", KeySHA256: hash('f'), Weight: 3, Priority: -100, FairnessHeader: true, PriorityHeader: true, CreatedAt: t0}
	for _, k := range []store.APIKey{limited, plain, untraced, traced, ops, queued} {
		if err := s.CreateKey(ctx(t), k); err != nil {
			t.Fatalf("CreateKey(%s): %v", k.ID, err)
		}
	}
	// Ordered by id, models kept in order (a comma inside a name included), no models
	// read back as nil, each trace mode kept ("" too: the gateway's), an admin key read
	// back as one and every other key as a tenant key, a key's place in the queue (weight,
	// class, the headers it may set) as created.
	want := []store.APIKey{ops, plain, limited, traced, untraced, queued}
	assertKeys(t, "after create", mustListKeys(t, s), want)
	assertKeys(t, "from a second gateway", mustListKeys(t, b.peer(t, s)), want)
}

func testKeysDuplicate(t *testing.T, b Backend) {
	s := b.New(t)
	if err := s.CreateKey(ctx(t), apiKey("team-a", 'a')); err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.APIKey{apiKey("team-a", 'b'), apiKey("team-b", 'a')} {
		if err := s.CreateKey(ctx(t), k); !errors.Is(err, store.ErrKeyExists) {
			t.Errorf("CreateKey(%s, %s…) = %v, want ErrKeyExists", k.ID, k.KeySHA256[:4], err)
		}
	}
	// A revoked key's id stays taken: the journal names tenants by id.
	if err := s.RevokeKey(ctx(t), "team-a", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateKey(ctx(t), apiKey("team-a", 'c')); !errors.Is(err, store.ErrKeyExists) {
		t.Errorf("CreateKey under a revoked key's id = %v, want ErrKeyExists", err)
	}
	assertKeys(t, "after refused creates", mustListKeys(t, s), []store.APIKey{{ID: "team-a", KeySHA256: hash('a'), CreatedAt: t0, RevokedAt: t0}})
}

func testKeysRevoke(t *testing.T, b Backend) {
	s := b.New(t)
	for _, k := range []store.APIKey{apiKey("team-a", 'a'), apiKey("team-b", 'b')} {
		if err := s.CreateKey(ctx(t), k); err != nil {
			t.Fatal(err)
		}
	}
	peer := b.peer(t, s)
	at := t0.Add(time.Minute)
	if err := peer.RevokeKey(ctx(t), "team-a", at); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	// Revoking again keeps the first time.
	if err := s.RevokeKey(ctx(t), "team-a", at.Add(time.Hour)); err != nil {
		t.Fatalf("RevokeKey again: %v", err)
	}
	if err := s.RevokeKey(ctx(t), "nobody", at); !errors.Is(err, store.ErrKeyNotFound) {
		t.Errorf("RevokeKey(unknown) = %v, want ErrKeyNotFound", err)
	}
	keys := mustListKeys(t, s)
	want := []store.APIKey{{ID: "team-a", KeySHA256: hash('a'), CreatedAt: t0, RevokedAt: at}, apiKey("team-b", 'b')}
	assertKeys(t, "after revoking team-a on the other gateway", keys, want)
	if !keys[0].Revoked() || keys[1].Revoked() {
		t.Errorf("Revoked() = %v, %v; want true, false", keys[0].Revoked(), keys[1].Revoked())
	}
}

func testKeysInvalid(t *testing.T, b Backend) {
	s := b.New(t)
	bad := map[string]store.APIKey{
		"empty id":          {KeySHA256: hash('a'), CreatedAt: t0},
		"long id":           {ID: strings.Repeat("x", 129), KeySHA256: hash('a'), CreatedAt: t0},
		"short hash":        {ID: "a", KeySHA256: "abc", CreatedAt: t0},
		"upper-case hash":   {ID: "a", KeySHA256: strings.Repeat("A", 64), CreatedAt: t0},
		"non-hex hash":      {ID: "a", KeySHA256: hash('g'), CreatedAt: t0},
		"no created time":   {ID: "a", KeySHA256: hash('a')},
		"negative limit":    {ID: "a", KeySHA256: hash('a'), CreatedAt: t0, RPM: -1},
		"negative weight":   {ID: "a", KeySHA256: hash('a'), CreatedAt: t0, Weight: -1},
		"class too high":    {ID: "a", KeySHA256: hash('a'), CreatedAt: t0, Priority: 101},
		"empty model name":  {ID: "a", KeySHA256: hash('a'), CreatedAt: t0, Models: []string{"m", ""}},
		"unknown traces":    {ID: "a", KeySHA256: hash('a'), CreatedAt: t0, Traces: "some"},
		"traces true":       {ID: "a", KeySHA256: hash('a'), CreatedAt: t0, Traces: "true"},
		"upper-case traces": {ID: "a", KeySHA256: hash('a'), CreatedAt: t0, Traces: "ALL"},
	}
	for why, k := range bad {
		switch err := s.CreateKey(ctx(t), k); {
		case err == nil:
			t.Errorf("CreateKey with %s succeeded", why)
		case k.Traces != "" && !strings.Contains(err.Error(), "not off, errors or all"):
			t.Errorf("CreateKey with %s = %v, want an error naming the trace modes", why, err)
		}
	}
	if err := s.RevokeKey(ctx(t), "a", time.Time{}); err == nil {
		t.Error("RevokeKey at the zero time succeeded")
	}
	assertKeys(t, "after invalid creates", mustListKeys(t, s), nil)
}

// Two gateways creating the same id at once: exactly one wins.
func testKeysRaceCreate(t *testing.T, b Backend) {
	s := b.New(t)
	handles := []store.Store{s, b.peer(t, s)}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = handles[i%2].CreateKey(ctx(t), apiKey("team-a", "abcdef01"[i]))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrKeyExists):
			t.Errorf("create %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d creates of one id succeeded, want 1", won)
	}
	if keys := mustListKeys(t, s); len(keys) != 1 {
		t.Errorf("%d keys stored, want 1", len(keys))
	}
}
