package store_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/faultproxy"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/pgtest"
	"github.com/fencegate/fencegate/internal/store/storetest"
)

// A watched store is the store it wraps: the conformance suite cannot tell them apart.
func TestWatchedConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			s := store.Watch(store.NewMemory(), store.DeferredOptions{})
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}

// Each wait lies within its bound: base doubled per retry, capped, its second half random;
// one seed gives one sequence, and the random half does vary.
func TestRetryDelay(t *testing.T) {
	const base, most = 500 * time.Millisecond, 30 * time.Second
	bounds := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	seq := func(seed uint64) []time.Duration {
		rnd := rand.New(rand.NewPCG(seed, 1))
		var out []time.Duration
		for n := 1; n <= len(bounds); n++ {
			out = append(out, store.RetryDelay(n, base, most, rnd))
		}
		return out
	}
	a, b := seq(7), seq(7)
	for i, d := range a {
		if d < bounds[i]/2 || d > bounds[i] {
			t.Errorf("retry %d waits %v, want within [%v, %v]", i+1, d, bounds[i]/2, bounds[i])
		}
		if d != b[i] {
			t.Errorf("retry %d: one seed gave %v and %v", i+1, d, b[i])
		}
	}
	varied := false
	for seed := uint64(1); seed < 20 && !varied; seed++ {
		varied = seq(seed)[6] != a[6]
	}
	if !varied {
		t.Error("the jitter never varies")
	}
}

// claimOf is the claim of a new keyed request.
func claimOf(id string) store.Claim {
	now := time.Now()
	return store.Claim{Now: now, Request: store.Request{ID: id, Tenant: "tenant-1", IdempotencyKey: "key-" + id,
		BodyHash: store.HashBody([]byte("body")), Model: "m", Owner: "gw-1", OwnerLeaseUntil: now.Add(time.Minute),
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}}
}

// throughProxy is dsn with its host and port replaced by addr.
func throughProxy(t *testing.T, dsn, addr string, params ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// pgTarget is the host:port of the test server.
func pgTarget(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// A PostgreSQL store that refuses the connection at first: OpenDeferred returns at once,
// every call is ErrUnavailable, the state says why; retries wait within their backoff
// bounds; when the database comes the schema is migrated, calls work, and a later outage
// and recovery show in the state.
func TestDeferredPostgresComesLater(t *testing.T) {
	dsn := pgtest.Schema(t)
	proxy, err := faultproxy.Start(pgTarget(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	proxy.Refuse(true)
	gate := storetest.NewRetryGate()
	st, err := store.OpenDeferred(t.Context(), throughProxy(t, dsn, proxy.Addr(), "pool_max_conns", "1"),
		store.DeferredOptions{Wait: gate.Wait, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("a refused connection is not an error of OpenDeferred: %v", err)
	}
	defer st.Close()

	if d := gate.Next(t); d < store.DefaultRetryBase/2 || d > store.DefaultRetryBase {
		t.Errorf("first retry after %v, want within [%v, %v]", d, store.DefaultRetryBase/2, store.DefaultRetryBase)
	}
	s := st.State()
	if s.Opened || s.Connected || s.Retries != 1 || !strings.Contains(s.LastError, "refused") || s.Since.IsZero() || s.NextRetry.IsZero() {
		t.Fatalf("state while refused: %+v", s)
	}
	if _, err := st.Claim(t.Context(), claimOf("req_1")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("claim while refused: %v", err)
	}
	if _, err := st.ListKeys(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("keys while refused: %v", err)
	}

	gate.Release() // a retry, still refused
	if d := gate.Next(t); d < 2*store.DefaultRetryBase/2 || d > 2*store.DefaultRetryBase {
		t.Errorf("second retry after %v, want within [%v, %v]", d, store.DefaultRetryBase, 2*store.DefaultRetryBase)
	}
	if s := st.State(); s.Retries != 2 || s.Opened {
		t.Fatalf("state after a second refusal: %+v", s)
	}
	select {
	case <-st.Ready():
		t.Fatal("ready while refused")
	default:
	}

	proxy.Refuse(false)
	gate.Release()
	select {
	case <-st.Ready():
	case <-t.Context().Done():
		t.Fatal("the store never opened")
	}
	if s := st.State(); !s.Opened || !s.Connected || s.LastError != "" || !s.NextRetry.IsZero() {
		t.Fatalf("state once open: %+v", s)
	}
	// The migrations ran against the fresh schema.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var migrations int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&migrations); err != nil || migrations == 0 {
		t.Fatalf("schema_migrations: %d rows, %v", migrations, err)
	}
	res, err := st.Claim(t.Context(), claimOf("req_1"))
	if err != nil || res.Status != store.ClaimNew {
		t.Fatalf("claim once open: %+v %v", res, err)
	}
	if _, err := st.Get(t.Context(), "req_unknown"); !errors.Is(err, store.ErrNotFound) || !st.State().Connected {
		t.Fatalf("an unknown request is an answer, not an outage: %v, %+v", err, st.State())
	}

	// An outage after it opened: the next call fails and says so; the next answer after
	// the outage says connected again.
	proxy.Refuse(true)
	proxy.Reset()
	if _, err := st.ListKeys(t.Context()); err == nil {
		t.Fatal("a call through a reset, refused connection succeeded")
	}
	if s := st.State(); s.Connected || !s.Opened || s.LastError == "" {
		t.Fatalf("state during a later outage: %+v", s)
	}
	proxy.Refuse(false)
	if _, err := st.ListKeys(t.Context()); err != nil {
		t.Fatalf("a call after the outage: %v", err)
	}
	if s := st.State(); !s.Connected || s.LastError != "" {
		t.Fatalf("state after the outage: %+v", s)
	}
}

// A DSN that does not parse is a configuration error, not an outage.
func TestDeferredBadDSN(t *testing.T) {
	if _, err := store.OpenDeferred(t.Context(), "postgres://127.0.0.1:notaport/db", store.DeferredOptions{}); err == nil {
		t.Fatal("a bad DSN opened")
	}
}

// Close ends the retries of a store that never came, and leaves no goroutine (TestMain).
func TestDeferredCloseWhileWaiting(t *testing.T) {
	proxy, err := faultproxy.Start("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.Refuse(true)
	gate := storetest.NewRetryGate()
	st, err := store.OpenDeferred(t.Context(), "postgres://postgres@"+proxy.Addr()+"/test?sslmode=disable",
		store.DeferredOptions{Wait: gate.Wait, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gate.Next(t)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(t.Context(), "req_1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("after close: %v", err)
	}
}
