package chaos

import (
	"context"
	"testing"
	"time"
)

// requireContract fails t for every violation of rep.
func requireContract(t *testing.T, rep Report) {
	t.Helper()
	for _, f := range rep.Found {
		t.Error(f)
	}
}

// requireEveryAPI fails t unless every API completed requests in the run, and the
// continuations and the error:hang fault were exercised.
func requireEveryAPI(t *testing.T, rep Report) {
	t.Helper()
	for _, api := range []string{"chat/stream", "completions/stream", "messages/stream", "messages/whole", "responses/stream", "responses/whole", "embeddings/whole"} {
		if a := rep.ByAPI[api]; a == nil || a.Completed == 0 {
			t.Errorf("the run completed no %s request", api)
		}
	}
	for _, kind := range []string{"continues", "error:hang", "whole", "engine-tool"} {
		if rep.ByKind[kind] == nil {
			t.Errorf("the run has no %s request", kind)
		}
	}
}

// A seeded chaos run: every history must keep the contract. The run is reproducible in its
// plan (which request, which API, which fault, where, on which replica, which client); the
// interleaving of concurrent requests is not, which is the point — the checker holds for
// any interleaving.
func TestChaosKeepsTheContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{Requests: 150, Concurrency: 8, Seed: 11, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s%s", rep, rep.APIs(), rep.Kinds())
	if rep.Completed == 0 || rep.Interrupted == 0 || rep.Failed == 0 || rep.Reruns == 0 || rep.Stalled == 0 || rep.Left == 0 {
		t.Errorf("the run did not exercise every ending: %s", rep)
	}
	requireEveryAPI(t, rep)
	requireContract(t, rep)
}

// With more requests in flight than the replicas take (max_outstanding 1 on each of three,
// sixteen at once), the rest wait in the pool's queue, and the contract holds for them:
// a rerun keeps its place, and the waits end in an answer or an honest error.
func TestChaosKeepsTheContractWhileQueueing(t *testing.T) {
	runWithReruns(t, Config{Requests: 150, Concurrency: 16, Seed: 5, MaxOutstanding: 1})
}

// The same in fenced mode, with gateway↔agent partitions: silent attempts are fenced and
// rerun, and the agents' records show every earlier attempt's engine request closed before
// the next attempt started.
func TestFencedChaosKeepsTheContract(t *testing.T) {
	runWithReruns(t, Config{Requests: 150, Concurrency: 8, Seed: 3, Fenced: true, Partitions: 3})
}

// Requests whose engine runs a tool itself, under a heavy fault rate (a share of the faults
// right after the tool ran, tool:1): the tool never runs twice for one request, in direct
// and fenced mode, and every client that lost its answer after the tool ran is told so.
func TestChaosEngineToolsRunOnce(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		rep, err := Run(ctx, Config{Requests: 120, Concurrency: 8, Seed: 23, FaultRate: 0.9, EngineTools: 1, Fenced: fenced})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		k := rep.ByKind["engine-tool"]
		if k == nil || k.Endings["interrupted"]+k.Endings["failed"] == 0 || k.Endings["completed"] == 0 {
			t.Errorf("fenced=%v: the run did not interrupt and complete engine-tool requests: %+v", fenced, k)
		}
		t.Logf("fenced=%v: %s\n%s", fenced, rep, rep.Kinds())
		requireContract(t, rep)
	}
}

// runWithReruns runs cfg and requires of its report reruns, every API and the contract.
func runWithReruns(t *testing.T, cfg Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s%s", rep, rep.APIs(), rep.Kinds())
	if rep.Completed == 0 || rep.Reruns == 0 {
		t.Errorf("the run did not exercise reruns: %s", rep)
	}
	requireEveryAPI(t, rep)
	requireContract(t, rep)
}
