package lease

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// tableStep is one operation in a scripted table scenario, with what it must
// return.
type tableStep struct {
	op      string // start, renew, revoke, end, valid, sweep
	attempt string
	epoch   uint64
	ttl     int64 // ms
	now     int64 // ms after t0
	want    any   // error class for start (nil or ErrStaleEpoch), Status, bool
}

// runTable runs a scenario; every lease a start made is also held by Ref, and each valid
// step checks ValidRef of the refs of that attempt and epoch against the same answer.
func runTable(t *testing.T, steps []tableStep) *Table {
	t.Helper()
	var tab Table
	type started struct {
		attempt string
		epoch   uint64
	}
	refs := map[started]Ref{}
	for i, s := range steps {
		switch s.op {
		case "start":
			err := tab.Start(s.attempt, s.epoch, ms(s.ttl), at(s.now))
			want, _ := s.want.(error)
			if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
				t.Fatalf("step %d Start(%s, %d) = %v, want %v", i, s.attempt, s.epoch, err, want)
			}
			if err == nil {
				refs[started{s.attempt, s.epoch}] = tab.Ref(s.attempt)
			}
		case "renew":
			if got := tab.Renew(s.attempt, s.epoch, ms(s.ttl), at(s.now)); got != s.want {
				t.Fatalf("step %d Renew(%s, %d) at %d = %v, want %v", i, s.attempt, s.epoch, s.now, got, s.want)
			}
		case "revoke":
			if got := tab.Revoke(s.attempt, s.epoch); got != s.want {
				t.Fatalf("step %d Revoke(%s, %d) = %v, want %v", i, s.attempt, s.epoch, got, s.want)
			}
		case "end":
			tab.End(s.attempt)
		case "valid":
			if got := tab.Valid(s.attempt, s.epoch, at(s.now)); got != s.want {
				t.Fatalf("step %d Valid(%s, %d) at %d = %v, want %v", i, s.attempt, s.epoch, s.now, got, s.want)
			}
			if ref, ok := refs[started{s.attempt, s.epoch}]; ok {
				if got := tab.ValidRef(ref, s.epoch, at(s.now)); got != s.want {
					t.Fatalf("step %d ValidRef(%s, %d) at %d = %v, want %v", i, s.attempt, s.epoch, s.now, got, s.want)
				}
			}
		case "sweep":
			tab.Sweep(at(s.now), ms(s.ttl))
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
	}
	return &tab
}

func TestTableScenarios(t *testing.T) {
	const a1, a2, b1 = "req_A.a1", "req_A.a2", "req_B.a1"
	cases := map[string][]tableStep{
		"expiry exactly at the boundary": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "valid", attempt: a1, epoch: 5, now: 299, want: true},
			{op: "valid", attempt: a1, epoch: 5, now: 300, want: false},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 300, want: Expired},
		},
		"renewal extends from receipt time and never shortens": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 200, want: Renewed},
			{op: "valid", attempt: a1, epoch: 5, now: 499, want: true},
			{op: "renew", attempt: a1, epoch: 5, ttl: 100, now: 250, want: Renewed},
			{op: "valid", attempt: a1, epoch: 5, now: 499, want: true},
			{op: "valid", attempt: a1, epoch: 5, now: 500, want: false},
		},
		"expired lease cannot be renewed back to life": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 301, want: Expired},
			{op: "valid", attempt: a1, epoch: 5, now: 302, want: false},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 302, want: Expired},
		},
		"epoch reuse refused": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 10, want: ErrStaleEpoch},
			{op: "start", attempt: a2, epoch: 5, ttl: 300, now: 10, want: ErrStaleEpoch},
			{op: "valid", attempt: a1, epoch: 5, now: 20, want: true},
		},
		"lower epoch refused, other requests independent": {
			{op: "start", attempt: a1, epoch: 9, ttl: 300, now: 0},
			{op: "start", attempt: a2, epoch: 8, ttl: 300, now: 0, want: ErrStaleEpoch},
			{op: "start", attempt: b1, epoch: 2, ttl: 300, now: 0},
			{op: "start", attempt: "req_C.a1", epoch: 0, ttl: 300, now: 0, want: ErrStaleEpoch},
		},
		"newer epoch supersedes the older attempt": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "start", attempt: a2, epoch: 6, ttl: 300, now: 10},
			{op: "valid", attempt: a1, epoch: 5, now: 20, want: false},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 20, want: Revoked},
			{op: "valid", attempt: a2, epoch: 6, now: 20, want: true},
		},
		"epoch mismatch": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "renew", attempt: a1, epoch: 4, ttl: 300, now: 10, want: StaleEpoch},
			{op: "renew", attempt: a1, epoch: 6, ttl: 300, now: 10, want: Unknown},
			{op: "valid", attempt: a1, epoch: 4, now: 10, want: false},
			{op: "renew", attempt: "req_Z.a1", epoch: 6, ttl: 300, now: 10, want: Unknown},
		},
		"revoke is final": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "revoke", attempt: a1, epoch: 5, want: Revoked},
			{op: "valid", attempt: a1, epoch: 5, now: 1, want: false},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 2, want: Revoked},
			{op: "revoke", attempt: a1, epoch: 5, want: Revoked},
			{op: "end", attempt: a1},
			{op: "revoke", attempt: a1, epoch: 5, want: Ended},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 3, want: Ended},
		},
		"revoke with an older epoch leaves the newer lease alone": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "revoke", attempt: a1, epoch: 4, want: StaleEpoch},
			{op: "valid", attempt: a1, epoch: 5, now: 1, want: true},
		},
		"cancel before its data request: the late request is refused": {
			{op: "revoke", attempt: a1, epoch: 5, want: Unknown},
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 10, want: ErrStaleEpoch},
			{op: "start", attempt: a2, epoch: 6, ttl: 300, now: 10},
		},
		"ended lease": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "end", attempt: a1},
			{op: "valid", attempt: a1, epoch: 5, now: 1, want: false},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 1, want: Ended},
		},
		"sweep forgets old leases but not before retain": {
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 0},
			{op: "end", attempt: a1},
			{op: "sweep", now: 1000, ttl: 60_000},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 1001, want: Ended},
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 1001, want: ErrStaleEpoch},
			{op: "sweep", now: 60_300, ttl: 60_000},
			{op: "renew", attempt: a1, epoch: 5, ttl: 300, now: 60_301, want: Unknown},
		},
		"sweep keeps a revoke tombstone for retain after it first sees it": {
			{op: "revoke", attempt: a1, epoch: 5, want: Unknown},
			{op: "sweep", now: 1_000_000, ttl: 60_000},
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 1_000_001, want: ErrStaleEpoch},
			{op: "sweep", now: 1_059_999, ttl: 60_000},
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 1_059_999, want: ErrStaleEpoch},
			{op: "sweep", now: 1_060_000, ttl: 60_000},
			{op: "start", attempt: a1, epoch: 5, ttl: 300, now: 1_060_000},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) { runTable(t, steps) })
	}
}

func TestTableLookupAndExpiresAt(t *testing.T) {
	var tab Table
	if _, ok := tab.ExpiresAt("req_A.a1"); ok {
		t.Fatal("empty table reports an expiry")
	}
	if err := tab.Start("req_A.a1", 3, ms(300), at(0)); err != nil {
		t.Fatal(err)
	}
	tab.Renew("req_A.a1", 3, ms(300), at(100))
	exp, ok := tab.ExpiresAt("req_A.a1")
	if !ok || !exp.Equal(at(400)) {
		t.Fatalf("ExpiresAt = %v, %v; want %v", exp, ok, at(400))
	}
	if err := tab.Start("req_A.a2", 4, ms(300), at(100)); err != nil {
		t.Fatal(err)
	}
	e, ok := tab.Lookup("req_A.a1")
	if !ok || e.Epoch != 3 || e.Revoked || !e.Superseded || e.Ended {
		t.Fatalf("Lookup of superseded lease = %+v, %v", e, ok)
	}
	if tab.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tab.Len())
	}
}

// A Ref answers as a lookup by id does while its lease is the table's, and is invalid
// once another lease took the id, whatever happens to its lease and its request:
// random starts (of new attempts, reruns of a request, and the same attempt id at a newer
// epoch, stale epochs among them), renewals, revocations (of held and unknown attempts),
// ends, sweeps and time passing, over a few requests so that every path crosses. After
// every operation each Ref ever taken is checked.
func TestValidRefAnswersAsValid(t *testing.T) {
	type taken struct {
		attempt string
		epoch   uint64
		ref     Ref
	}
	valid, checks := 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x7ab1e))
		var tab Table
		var refs []taken
		now := int64(0)
		epoch := uint64(0)
		attempt := func() string {
			return fmt.Sprintf("req_%d.a%d", rng.IntN(4), 1+rng.IntN(3))
		}
		for step := range 400 {
			now += rng.Int64N(40)
			switch r := rng.IntN(10); {
			case r < 3:
				id := attempt()
				e := epoch + 1
				if rng.IntN(5) == 0 && epoch > 1 {
					e = epoch - uint64(rng.IntN(2)) // stale: refused
				} else {
					epoch = e
				}
				if tab.Start(id, e, ms(50+rng.Int64N(300)), at(now)) == nil {
					refs = append(refs, taken{id, e, tab.Ref(id)})
				}
			case r < 5:
				if len(refs) > 0 {
					k := refs[rng.IntN(len(refs))]
					tab.Renew(k.attempt, k.epoch, ms(50+rng.Int64N(300)), at(now))
				}
			case r < 6:
				if len(refs) > 0 && rng.IntN(2) == 0 {
					k := refs[rng.IntN(len(refs))]
					tab.Revoke(k.attempt, k.epoch)
				} else {
					epoch++
					tab.Revoke(attempt(), epoch) // a cancel that may come before its data request
				}
			case r < 7:
				tab.End(attempt())
			case r < 8:
				tab.Sweep(at(now), ms(rng.Int64N(200)))
			}
			for _, k := range refs {
				// Once another lease took the attempt id — a newer epoch, or the same
				// one again after a sweep forgot the first — Valid speaks of that lease
				// and the Ref's, superseded or long expired, is never valid again.
				want := tab.Ref(k.attempt) == k.ref && tab.Valid(k.attempt, k.epoch, at(now))
				if got := tab.ValidRef(k.ref, k.epoch, at(now)); got != want {
					t.Fatalf("seed %d step %d: ValidRef(%s, %d) = %v, want %v", seed, step, k.attempt, k.epoch, got, want)
				}
				checks++
				if want {
					valid++
				}
			}
		}
	}
	// Not vacuous: both answers were seen many times.
	if valid < 10_000 || checks-valid < 10_000 {
		t.Fatalf("%d checks, %d of them valid: the schedule does not exercise both answers", checks, valid)
	}
	if got := (&Table{}).ValidRef(Ref{}, 1, at(0)); got {
		t.Fatal("the zero Ref is valid")
	}
}
