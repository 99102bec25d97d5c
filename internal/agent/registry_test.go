package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
)

// The attempts a new epoch supersedes are found through the index by logical request,
// and are the ones a scan of every live attempt finds: of the same request (another
// attempt, or the same attempt id at an older epoch) and below the new epoch. The index
// holds exactly the live attempts, through re-starts of an id and ends in any order.
func TestSupersededFoundByRequest(t *testing.T) {
	// The agent's clock stands still at the attempts' start: their hour-long leases then
	// never run out, and no expiry timer aborts an attempt that has no handler behind it.
	fc := newFakeClock()
	a := startAgent(t, Config{Engine: "http://127.0.0.1:1", Now: fc.Now})
	clock := fc.Now()
	scan := func(id string, epoch uint64) []*attempt { // the definition: every live attempt
		var out []*attempt
		for _, at := range a.live {
			if at.epoch < epoch && lease.RequestOf(at.id) == lease.RequestOf(id) {
				out = append(out, at)
			}
		}
		return out
	}
	sameSet := func(x, y []*attempt) bool {
		if len(x) != len(y) {
			return false
		}
		for _, at := range x {
			if !slices.Contains(y, at) {
				return false
			}
		}
		return true
	}
	// checkIndex fails the test, after letting go of the agent's lock, unless the index
	// holds exactly the live attempts, each under its own request.
	checkIndex := func(step string) {
		t.Helper()
		a.mu.Lock()
		var problem string
		var indexed []*attempt
		for req, ats := range a.liveByRequest {
			if len(ats) == 0 {
				problem = "request " + req + " indexed with no attempts"
			}
			for _, at := range ats {
				if lease.RequestOf(at.id) != req {
					problem = at.id + " indexed under " + req
				}
			}
			indexed = append(indexed, ats...)
		}
		live := slices.Collect(maps.Values(a.live))
		a.mu.Unlock()
		if problem == "" && !sameSet(indexed, live) {
			problem = fmt.Sprintf("indexed %v, live %v", ids(indexed), ids(live))
		}
		if problem != "" {
			t.Fatalf("%s: %s", step, problem)
		}
	}
	start := func(id string, epoch uint64) (*attempt, []*attempt) {
		t.Helper()
		ctx, cancel := context.WithCancelCause(context.Background())
		at := &attempt{id: id, epoch: epoch, started: clock, ctx: ctx, cancel: cancel, done: make(chan struct{})}
		a.mu.Lock()
		want := scan(id, epoch)
		a.mu.Unlock()
		got, err := a.register(at, time.Hour)
		if err != nil {
			t.Fatalf("register %s epoch %d: %v", id, epoch, err)
		}
		if !sameSet(got, want) {
			t.Fatalf("%s epoch %d superseded %v, a scan finds %v", id, epoch, ids(got), ids(want))
		}
		checkIndex("after " + id)
		return at, got
	}
	end := func(at *attempt) {
		t.Helper()
		a.finish(at, EndFinished)
		checkIndex("after the end of " + at.id)
	}

	x1, sup := start("req_x.a1", 1)
	if len(sup) != 0 {
		t.Fatalf("the first attempt superseded %v", ids(sup))
	}
	x2, sup := start("req_x.a2", 2)
	if !sameSet(sup, []*attempt{x1}) {
		t.Fatalf("a rerun superseded %v, want req_x.a1", ids(sup))
	}
	x2again, sup := start("req_x.a2", 3) // the same attempt id at a newer epoch
	if !sameSet(sup, []*attempt{x1, x2}) {
		t.Fatalf("a newer epoch of req_x.a2 superseded %v, want both before it", ids(sup))
	}
	y1, sup := start("req_y.a1", 4)
	if len(sup) != 0 {
		t.Fatalf("another request's attempt superseded %v", ids(sup))
	}
	end(x2) // replaced by x2again: ending it changes nothing live
	x3, sup := start("req_x.a3", 5)
	if !sameSet(sup, []*attempt{x1, x2again}) {
		t.Fatalf("req_x.a3 superseded %v, want req_x.a1 and the newer req_x.a2", ids(sup))
	}
	for _, at := range []*attempt{y1, x1, x3, x2again} {
		end(at)
	}
	if len(a.live) != 0 || len(a.liveByRequest) != 0 {
		t.Fatalf("nothing runs, yet live %v and index %v", a.live, a.liveByRequest)
	}
}

func ids(ats []*attempt) []string {
	out := make([]string, len(ats))
	for i, at := range ats {
		out[i] = at.id
	}
	return out
}
