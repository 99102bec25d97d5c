package queue

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

// fill pushes entries named by spec: "flow[/sub][@prio][!]" ("!" a rerun), one second apart
// from t0, with ids from 1 on.
func fill(t *testing.T, q *Queue, weights map[string]int, spec ...string) {
	t.Helper()
	for _, s := range spec {
		e := parse(s)
		e.ID = uint64(q.seq + 1)
		e.At = t0.Add(time.Duration(e.ID) * time.Second)
		e.Weight = weights[e.Flow]
		if _, ok := q.Push(e); !ok {
			t.Fatalf("push %s refused", s)
		}
	}
}

func parse(s string) Entry {
	var e Entry
	if strings.HasSuffix(s, "!") {
		e.Rerun, s = true, strings.TrimSuffix(s, "!")
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		fmt.Sscan(s[i+1:], &e.Priority)
		s = s[:i]
	}
	e.Flow, e.Sub, _ = strings.Cut(s, "/")
	return e
}

func name(e Entry) string {
	s := e.Flow
	if e.Sub != "" {
		s += "/" + e.Sub
	}
	if e.Priority != 0 {
		s += fmt.Sprintf("@%d", e.Priority)
	}
	if e.Rerun {
		s += "!"
	}
	return s
}

// drainAll serves every entry and returns their names in order.
func drainAll(q *Queue) []string {
	var out []string
	for {
		e, ok := q.Next(t0, nil)
		if !ok {
			return out
		}
		out = append(out, name(e))
	}
}

func TestOrder(t *testing.T) {
	cases := []struct {
		name    string
		weights map[string]int
		push    []string
		want    string
	}{
		{"one flow is first come first served", nil,
			[]string{"a", "a", "a"}, "a a a"},
		{"a higher class goes first, whatever came before", nil,
			[]string{"a", "b", "c@5", "a@-1", "b@5"}, "c@5 b@5 a b a@-1"},
		{"a key sending one at a time is not behind a flood", nil,
			[]string{"a", "a", "a", "a", "b"}, "a b a a a"},
		{"two floods alternate", nil,
			[]string{"a", "a", "a", "b", "b", "b"}, "a b a b a b"},
		{"weights 3:1", map[string]int{"a": 3, "b": 1},
			[]string{"a", "a", "a", "a", "a", "a", "b", "b", "b"}, "a b a a a b a a b"},
		{"fairness ids share their key", nil,
			[]string{"p/x", "p/x", "p/x", "p/y", "q"}, "p/x q p/y p/x p/x"},
		{"a rerun keeps its place ahead of first tries", nil,
			[]string{"a", "b", "c!"}, "c! a b"},
		{"reruns in the order their requests first asked; classes still rule", nil,
			[]string{"a", "b!", "c!", "d@1"}, "d@1 b! c! a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue
			fill(t, &q, tc.weights, tc.push...)
			if got := strings.Join(drainAll(&q), " "); got != tc.want {
				t.Fatalf("served %q, want %q", got, tc.want)
			}
			if q.Len() != 0 {
				t.Fatalf("%d left", q.Len())
			}
		})
	}
}

func TestRerunOrderIsWhenFirstAsked(t *testing.T) {
	var q Queue
	q.Push(Entry{ID: 1, Flow: "a", Rerun: true, At: t0.Add(5 * time.Second)})
	q.Push(Entry{ID: 2, Flow: "b", Rerun: true, At: t0.Add(time.Second)})
	e, _ := q.Next(t0, nil)
	if e.ID != 2 {
		t.Fatalf("served %d first, want 2 (it asked first)", e.ID)
	}
}

func TestWeightsHoldUnderSustainedLoad(t *testing.T) {
	var q Queue
	id := uint64(0)
	push := func(flow string, w int) {
		id++
		q.Push(Entry{ID: id, Flow: flow, Weight: w})
	}
	for range 8 {
		push("a", 3)
		push("b", 1)
	}
	served := map[string]int{}
	for range 4000 {
		e, ok := q.Next(t0, nil)
		if !ok {
			t.Fatal("queue ran dry")
		}
		served[e.Flow]++
		push(e.Flow, e.Weight) // each flow keeps its backlog, as a flooding client does
	}
	if r := float64(served["a"]) / float64(served["b"]); r < 2.97 || r > 3.03 {
		t.Fatalf("served %v: ratio %.3f, want 3", served, r)
	}
}

func TestEligibleSkips(t *testing.T) {
	var q Queue
	fill(t, &q, nil, "a!", "b", "c")
	notA := func(e Entry) bool { return e.Flow != "a" }
	e, ok := q.Next(t0, notA)
	if !ok || e.Flow != "b" {
		t.Fatalf("served %+v, want b (a's rerun cannot take the slot)", e)
	}
	if e, _ := q.Next(t0, nil); e.Flow != "a" {
		t.Fatalf("served %s, want the waiting rerun a", name(e))
	}
	if _, ok := q.Next(t0, func(Entry) bool { return false }); ok {
		t.Fatal("served an entry nothing may take")
	}
	if q.Len() != 1 {
		t.Fatalf("len %d, want 1", q.Len())
	}
}

func TestExpireAndRemove(t *testing.T) {
	var q Queue
	for i, wait := range []time.Duration{3, 1, 0, 2} {
		e := Entry{ID: uint64(i + 1), Flow: "a", At: t0}
		if wait > 0 {
			e.Deadline = t0.Add(wait * time.Second)
		}
		q.Push(e)
	}
	if d := q.NextDeadline(); !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("next deadline %v, want t0+1s", d)
	}
	if got := q.Expire(t0.Add(999 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("expired %v before any deadline", got)
	}
	got := q.Expire(t0.Add(2 * time.Second))
	if len(got) != 2 || got[0].ID != 2 || got[1].ID != 4 {
		t.Fatalf("expired %+v, want ids 2 and 4 (deadlines 1s, 2s), in arrival order", got)
	}
	if _, ok := q.Remove(1); !ok {
		t.Fatal("Remove(1) did not find it")
	}
	if _, ok := q.Remove(1); ok {
		t.Fatal("Remove(1) found it twice")
	}
	if e, _ := q.Next(t0, nil); e.ID != 3 || q.Len() != 0 {
		t.Fatalf("served %d with %d left, want 3 and none", e.ID, q.Len())
	}
}

func TestShedding(t *testing.T) {
	cases := []struct {
		name    string
		weights map[string]int
		full    []string // the queue, MaxLen entries
		push    string
		shed    string // "" : the push is refused; "-": accepted, nothing shed
		left    string // what is then served, in order
	}{
		{"the flooding key loses its newest, not the newcomer", nil,
			[]string{"a", "a", "a"}, "b", "a", "a b a"},
		{"the flooding key's own arrival is refused", nil,
			[]string{"a", "a", "b"}, "a", "", "a b a"},
		{"equal shares: the arrival is refused", nil,
			[]string{"a", "b"}, "c", "", "a b"},
		{"the lowest class is shed first", nil,
			[]string{"a@1", "b@-1", "a"}, "c@1", "b@-1", "a@1 c@1 a"},
		{"a lower arrival into a queue of higher ones is refused", nil,
			[]string{"a@1", "b@1"}, "c", "", "a@1 b@1"},
		{"weights count: the heavier key may hold more", map[string]int{"a": 3},
			[]string{"a", "a", "b", "b"}, "a", "b", "a b a a"},
		{"a rerun is never shed, and displaces a first try", nil,
			[]string{"a!", "a!", "b"}, "c!", "b", "a! a! c!"},
		{"a rerun is refused when only reruns wait", nil,
			[]string{"a!", "b!"}, "c!", "", "a! b!"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := Queue{MaxLen: len(tc.full)}
			fill(t, &q, tc.weights, tc.full...)
			e := parse(tc.push)
			e.ID, e.At, e.Weight = 100, t0.Add(time.Minute), tc.weights[e.Flow]
			shed, ok := q.Push(e)
			switch {
			case tc.shed == "" && ok:
				t.Fatalf("push accepted (shed %+v), want it refused", shed)
			case tc.shed == "-" && (!ok || shed != nil):
				t.Fatalf("push: shed %+v ok %v, want accepted with nothing shed", shed, ok)
			case tc.shed != "" && tc.shed != "-" && (!ok || shed == nil || name(*shed) != tc.shed):
				t.Fatalf("push: shed %+v ok %v, want %s shed", shed, ok, tc.shed)
			}
			if ok && shed != nil && shed.ID == 100 {
				t.Fatal("shed the entry it accepted")
			}
			if got := strings.Join(drainAll(&q), " "); got != tc.left {
				t.Fatalf("then served %q, want %q", got, tc.left)
			}
		})
	}
}

func TestShedTakesTheNewest(t *testing.T) {
	q := Queue{MaxLen: 3}
	fill(t, &q, nil, "a", "a", "a")
	shed, ok := q.Push(Entry{ID: 9, Flow: "b"})
	if !ok || shed == nil || shed.ID != 3 {
		t.Fatalf("shed %+v, want a's newest (id 3)", shed)
	}
}

func TestLens(t *testing.T) {
	var q Queue
	fill(t, &q, nil, "a", "b@2", "c@2!", "d@-1")
	if q.Len() != 4 || q.LenOf(2) != 2 || q.LenOf(0) != 1 || q.LenOf(7) != 0 {
		t.Fatalf("len %d, class 2: %d, class 0: %d", q.Len(), q.LenOf(2), q.LenOf(0))
	}
	if got := fmt.Sprint(q.Priorities()); got != "[2 0 -1]" {
		t.Fatalf("priorities %s", got)
	}
}

func TestRetryAfterFromDrainRate(t *testing.T) {
	var q Queue
	if d := q.RetryAfter(t0, 7*time.Second); d != 7*time.Second {
		t.Fatalf("no rate yet: %v, want the fallback", d)
	}
	for i := range 12 {
		q.Push(Entry{ID: uint64(i + 1), Flow: "a"})
	}
	// Two served per second for five seconds.
	for i := range 10 {
		q.Next(t0.Add(time.Duration(i)*500*time.Millisecond), nil)
	}
	now := t0.Add(5 * time.Second)
	// 2 waiting, at 2/s: the next one (a newcomer, third) is served in 1.5 s.
	if d := q.RetryAfter(now, 0); d != 1500*time.Millisecond {
		t.Fatalf("retry after %v, want 1.5s", d)
	}
	// A minute later the services are too old to give a rate.
	if d := q.RetryAfter(now.Add(2*time.Minute), 9*time.Second); d != 9*time.Second {
		t.Fatalf("stale rate: %v, want the fallback", d)
	}
}
