package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUnavailable is what a Deferred store answers until its database has been reached and
// its schema brought up to date: the caller serves what needs no store and refuses the
// rest (docs/design.md §7, "Starting without the store").
var ErrUnavailable = errors.New("store: not connected yet")

// DeferredOptions configures how a Deferred store tries its database again. The zero value
// gives the defaults.
type DeferredOptions struct {
	// RetryBase and RetryMax bound the wait between two connection attempts (RetryDelay):
	// it doubles from RetryBase up to RetryMax. Defaults 500ms and 30s.
	RetryBase, RetryMax time.Duration
	// Rand is the jitter's source. Default: seeded from the clock.
	Rand *rand.Rand
	// Wait waits d, or until ctx ends (then it returns ctx's error). Default: a timer. A
	// test replaces it to decide when each attempt happens.
	Wait func(ctx context.Context, d time.Duration) error
	// ConnectTimeout bounds one connection attempt, migrations included. Default 10s.
	ConnectTimeout time.Duration
	// Now is the clock of State's times. Default time.Now.
	Now func() time.Time
	// Logger receives failed attempts and the connection. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of DeferredOptions.
const (
	DefaultRetryBase      = 500 * time.Millisecond
	DefaultRetryMax       = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
)

func (o DeferredOptions) withDefaults() DeferredOptions {
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.Rand == nil {
		seed := uint64(time.Now().UnixNano())
		o.Rand = rand.New(rand.NewPCG(seed, seed>>1|1))
	}
	if o.Wait == nil {
		o.Wait = waitTimer
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func waitTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// State is what a Deferred store knows of its database.
type State struct {
	// Opened: the database was reached and its schema is up to date; from then on the
	// store stays open (a pool reconnects on its own).
	Opened bool
	// Connected: the store is open and its last call was answered (an answer such as
	// ErrNotFound counts; a caller that gave up does not count either way).
	Connected bool
	// Since is when Connected last changed; before the store opened, when the first
	// connection attempt failed.
	Since time.Time
	// LastError is the last failure, of a connection attempt or of a call; empty while
	// connected.
	LastError string
	// Retries counts the failed connection attempts before the store opened.
	Retries int
	// NextRetry is when the next connection attempt is due; zero once opened.
	NextRetry time.Time
}

// Deferred is a Store whose database may come after the process: OpenDeferred returns at
// once, and until the database answers (and its migrations ran) every call fails with
// ErrUnavailable while a goroutine tries again with a capped, jittered backoff. Once open
// it forwards every call and watches their answers, so that State says whether the
// database answers now, not only whether it did once. Safe for concurrent use.
type Deferred struct {
	open func(ctx context.Context) (Store, error)
	opts DeferredOptions

	cur     atomic.Pointer[openStore] // nil until opened
	healthy atomic.Bool               // State.Connected, read without the lock on every call

	mu     sync.Mutex
	state  State
	closed bool
	ready  chan struct{} // closed once opened

	stop context.CancelFunc
	done chan struct{} // closed when the retries end
}

// openStore holds the opened store (atomic.Pointer needs a concrete type).
type openStore struct{ Store }

var _ Store = (*Deferred)(nil)

// OpenDeferred opens the store named by dsn (see Open). A PostgreSQL store that cannot be
// reached now (or whose migrations fail) is returned anyway, not connected, and is tried
// again in the background until Close; ctx bounds only this first attempt. A DSN that does
// not parse, and an SQLite or memory store that does not open, are errors as with Open:
// they are mistakes of the configuration, not outages.
func OpenDeferred(ctx context.Context, dsn string, opts DeferredOptions) (*Deferred, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		st, err := Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return Watch(st, opts), nil
	}
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return nil, fmt.Errorf("store: postgres: parse dsn: %w", err)
	}
	d := newDeferred(func(ctx context.Context) (Store, error) { return openPostgres(ctx, dsn) }, opts)
	life, stop := context.WithCancel(context.Background())
	d.stop = stop
	if d.connect(ctx, life) {
		close(d.done)
		return d, nil
	}
	go d.retry(life)
	return d, nil
}

// Watch wraps a store that is open already, to report its state as a Deferred does.
func Watch(st Store, opts DeferredOptions) *Deferred {
	d := newDeferred(nil, opts)
	d.stop = func() {}
	close(d.done)
	d.install(st)
	return d
}

func newDeferred(open func(context.Context) (Store, error), opts DeferredOptions) *Deferred {
	return &Deferred{open: open, opts: opts.withDefaults(), ready: make(chan struct{}), done: make(chan struct{})}
}

// Ready is closed once the store is open.
func (d *Deferred) Ready() <-chan struct{} { return d.ready }

// Connected reports State().Connected without copying the state.
func (d *Deferred) Connected() bool { return d.healthy.Load() }

// State returns what the store knows of its database now.
func (d *Deferred) State() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

// retry tries the database again after each wait until it opens or life ends.
func (d *Deferred) retry(life context.Context) {
	defer close(d.done)
	for n := 1; ; n++ {
		delay := RetryDelay(n, d.opts.RetryBase, d.opts.RetryMax, d.opts.Rand)
		d.mu.Lock()
		d.state.NextRetry = d.opts.Now().Add(delay)
		d.mu.Unlock()
		if d.opts.Wait(life, delay) != nil {
			return
		}
		if d.connect(life, life) {
			return
		}
	}
}

// connect makes one connection attempt (bounded by ctx and ConnectTimeout) and reports
// whether the store is open now. life is the store's own lifetime: a failure after it
// ended is Close's doing, not the database's.
func (d *Deferred) connect(ctx, life context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, d.opts.ConnectTimeout)
	st, err := d.open(cctx)
	cancel()
	if err != nil {
		if life.Err() != nil {
			return false
		}
		d.mu.Lock()
		d.state.Retries++
		d.state.LastError = err.Error()
		if d.state.Since.IsZero() {
			d.state.Since = d.opts.Now()
		}
		n := d.state.Retries
		d.mu.Unlock()
		d.opts.Logger.Warn("store not reachable; serving without it and trying again", "attempt", n, "err", err)
		return false
	}
	if !d.install(st) {
		st.Close() // Close came first: nobody will use it
		return false
	}
	d.opts.Logger.Info("store connected; its schema is up to date")
	return true
}

// install makes st the store; it reports false when the Deferred was closed meanwhile.
func (d *Deferred) install(st Store) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.cur.Store(&openStore{st})
	d.state = State{Opened: true, Connected: true, Since: d.opts.Now(), Retries: d.state.Retries}
	d.healthy.Store(true)
	close(d.ready)
	return true
}

// store returns the open store, or nil.
func (d *Deferred) store() Store {
	if o := d.cur.Load(); o != nil {
		return o.Store
	}
	return nil
}

// observe records whether a call's answer came from the database. Answers that are
// outcomes (ErrNotFound and the like) count as answered; a caller that cancelled counts
// for nothing. Only a change takes the lock.
func (d *Deferred) observe(ctx context.Context, err error) {
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return
	}
	ok := err == nil || answered(err)
	if d.healthy.Load() == ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.Connected == ok {
		return
	}
	d.state.Connected, d.state.Since = ok, d.opts.Now()
	d.healthy.Store(ok)
	if ok {
		d.state.LastError = ""
	} else {
		d.state.LastError = err.Error()
	}
}

// answered reports an error that is the store's answer, not its failure.
func answered(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotOwner) || errors.Is(err, ErrKeyExists) || errors.Is(err, ErrKeyNotFound)
}

// Close stops the retries and closes the store if it was opened.
func (d *Deferred) Close() error {
	d.stop()
	<-d.done
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	if st := d.store(); st != nil {
		return st.Close()
	}
	return nil
}

// The methods below forward to the open store, or fail with ErrUnavailable.

// Claim implements Store.
func (d *Deferred) Claim(ctx context.Context, c Claim) (ClaimResult, error) {
	st := d.store()
	if st == nil {
		return ClaimResult{}, ErrUnavailable
	}
	res, err := st.Claim(ctx, c)
	d.observe(ctx, err)
	return res, err
}

// Apply implements Store.
func (d *Deferred) Apply(ctx context.Context, muts []Mutation) error {
	st := d.store()
	if st == nil {
		return ErrUnavailable
	}
	err := st.Apply(ctx, muts)
	d.observe(ctx, err)
	return err
}

// MarkFirstDelta implements Store.
func (d *Deferred) MarkFirstDelta(ctx context.Context, requestID, owner string, at time.Time) error {
	st := d.store()
	if st == nil {
		return ErrUnavailable
	}
	err := st.MarkFirstDelta(ctx, requestID, owner, at)
	d.observe(ctx, err)
	return err
}

// RenewOwner implements Store.
func (d *Deferred) RenewOwner(ctx context.Context, owner string, until time.Time) (int64, error) {
	st := d.store()
	if st == nil {
		return 0, ErrUnavailable
	}
	n, err := st.RenewOwner(ctx, owner, until)
	d.observe(ctx, err)
	return n, err
}

// Get implements Store.
func (d *Deferred) Get(ctx context.Context, requestID string) (*Request, error) {
	st := d.store()
	if st == nil {
		return nil, ErrUnavailable
	}
	r, err := st.Get(ctx, requestID)
	d.observe(ctx, err)
	return r, err
}

// FindByResponseID implements Store.
func (d *Deferred) FindByResponseID(ctx context.Context, responseID string) (*Request, error) {
	st := d.store()
	if st == nil {
		return nil, ErrUnavailable
	}
	r, err := st.FindByResponseID(ctx, responseID)
	d.observe(ctx, err)
	return r, err
}

// Traces implements Store.
func (d *Deferred) Traces(ctx context.Context, requestID string) ([]TraceEvent, error) {
	st := d.store()
	if st == nil {
		return nil, ErrUnavailable
	}
	t, err := st.Traces(ctx, requestID)
	d.observe(ctx, err)
	return t, err
}

// Sweep implements Store.
func (d *Deferred) Sweep(ctx context.Context, now time.Time) (int64, error) {
	st := d.store()
	if st == nil {
		return 0, ErrUnavailable
	}
	n, err := st.Sweep(ctx, now)
	d.observe(ctx, err)
	return n, err
}

// CreateKey implements KeyStore.
func (d *Deferred) CreateKey(ctx context.Context, k APIKey) error {
	st := d.store()
	if st == nil {
		return ErrUnavailable
	}
	err := st.CreateKey(ctx, k)
	d.observe(ctx, err)
	return err
}

// ListKeys implements KeyStore.
func (d *Deferred) ListKeys(ctx context.Context) ([]APIKey, error) {
	st := d.store()
	if st == nil {
		return nil, ErrUnavailable
	}
	ks, err := st.ListKeys(ctx)
	d.observe(ctx, err)
	return ks, err
}

// RevokeKey implements KeyStore.
func (d *Deferred) RevokeKey(ctx context.Context, id string, at time.Time) error {
	st := d.store()
	if st == nil {
		return ErrUnavailable
	}
	err := st.RevokeKey(ctx, id, at)
	d.observe(ctx, err)
	return err
}

// Recent implements Store.
func (d *Deferred) Recent(ctx context.Context, q RecentQuery) ([]*Request, error) {
	st := d.store()
	if st == nil {
		return nil, ErrUnavailable
	}
	r, err := st.Recent(ctx, q)
	d.observe(ctx, err)
	return r, err
}
