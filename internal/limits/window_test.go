package limits

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// at is the sliding state t after (prev, cur, elapsed), with nothing counted meanwhile.
func at(prev, cur int64, elapsed, t time.Duration) (int64, int64, time.Duration) {
	e := elapsed + t
	switch {
	case e < Window:
		return prev, cur, e
	case e < 2*Window:
		return cur, 0, e - Window
	}
	return 0, 0, e % Window
}

// waitFor is exact to the millisecond: a refused unit fits at the wait and not a
// millisecond before it, and a reset leaves nothing counted.
func TestWaitForProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Int64Range(1, 5000).Draw(t, "limit")
		prev := rapid.Int64Range(0, 3*limit).Draw(t, "prev")
		cur := rapid.Int64Range(0, 3*limit).Draw(t, "cur")
		elapsed := time.Duration(rapid.Int64Range(0, Window.Milliseconds()-1).Draw(t, "elapsed_ms")) * time.Millisecond
		w := waitFor(prev, cur, elapsed, limit)
		if admits(prev, cur, elapsed, limit) {
			if w != 0 {
				t.Fatalf("admitted now, but wait %s", w)
			}
			return
		}
		if w <= 0 || w > 2*Window {
			t.Fatalf("wait %s out of (0, 2m]", w)
		}
		if p, c, e := at(prev, cur, elapsed, w); !admits(p, c, e, limit) {
			t.Fatalf("not admitted after the wait %s (estimate %.3f)", w, estimate(p, c, e))
		}
		if w > time.Millisecond {
			if p, c, e := at(prev, cur, elapsed, w-time.Millisecond); admits(p, c, e, limit) {
				t.Fatalf("admitted a millisecond before the wait %s", w)
			}
		}
		q := quota(prev, cur, elapsed, limit)
		if p, c, _ := at(prev, cur, elapsed, q.Reset); p != 0 || c != 0 {
			t.Fatalf("reset %s leaves %d, %d counted", q.Reset, p, c)
		}
	})
}
