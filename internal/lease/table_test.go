package lease

import (
	"errors"
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

func runTable(t *testing.T, steps []tableStep) *Table {
	t.Helper()
	var tab Table
	for i, s := range steps {
		switch s.op {
		case "start":
			err := tab.Start(s.attempt, s.epoch, ms(s.ttl), at(s.now))
			want, _ := s.want.(error)
			if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
				t.Fatalf("step %d Start(%s, %d) = %v, want %v", i, s.attempt, s.epoch, err, want)
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
