package chaos

import (
	"context"
	"testing"
	"time"
)

// A seeded chaos run: every history must keep the contract. The run is reproducible in its
// plan (which request, which fault, where, on which replica, which client); the
// interleaving of concurrent requests is not, which is the point — the checker holds for
// any interleaving.
func TestChaosKeepsTheContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{Requests: 150, Concurrency: 8, Seed: 11, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s", rep, rep.Kinds())
	for _, v := range rep.Violations {
		t.Error(v)
	}
	if rep.Completed == 0 || rep.Interrupted == 0 || rep.Failed == 0 || rep.Reruns == 0 || rep.Stalled == 0 || rep.Left == 0 {
		t.Errorf("the run did not exercise every ending: %s", rep)
	}
}

// The same in fenced mode, with gateway↔agent partitions: silent attempts are fenced and
// rerun, and the agents' records show every earlier attempt's engine request closed before
// the next attempt started.
func TestFencedChaosKeepsTheContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{Requests: 150, Concurrency: 8, Seed: 3, Fenced: true, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s", rep, rep.Kinds())
	for _, v := range rep.Violations {
		t.Error(v)
	}
	if rep.Completed == 0 || rep.Reruns == 0 {
		t.Errorf("the run did not exercise reruns: %s", rep)
	}
}
