package balance

import (
	"fmt"
	"testing"
	"time"
)

func pool() *Pool {
	return &Pool{Model: "m", Cooldown: 10 * time.Second, Replicas: []*Replica{
		{Name: "a"}, {Name: "b"}, {Name: "backup", Priority: 1},
	}}
}

func names(exclude ...string) func(*Replica) bool {
	return func(r *Replica) bool {
		for _, n := range exclude {
			if r.Name == n {
				return true
			}
		}
		return false
	}
}

func TestPickLeastLoadedLowestTier(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	p.Replicas[0].Outstanding = 3
	p.Replicas[1].Outstanding = 1
	if r := p.Pick(now, nil, 0).Replica; r.Name != "b" {
		t.Fatalf("picked %s, want b (least outstanding in tier 0; the idle backup is tier 1)", r.Name)
	}
	// The engine's queue counts: b reports a deep queue (another gateway's work).
	p.Replicas[1].Load = Load{Running: 4, Waiting: 5, At: now}
	if r := p.Pick(now, nil, 0).Replica; r.Name != "a" {
		t.Fatalf("picked %s, want a (b's engine queue is deep)", r.Name)
	}
	if r := p.Pick(now, names("a", "b"), 0).Replica; r.Name != "backup" {
		t.Fatalf("picked %v, want the backup tier once tier 0 is excluded", r)
	}
	if c := p.Pick(now, names("a", "b", "backup"), 0); c.Replica != nil || c.Shed {
		t.Fatalf("picked %+v with everything excluded", c)
	}
}

func TestLimitsShed(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	p.Limits = Limits{MaxOutstanding: 2, MaxQueue: 3, StaleAfter: 5 * time.Second}
	p.Replicas[0].Outstanding = 2
	p.Replicas[1].Load = Load{Waiting: 3, At: now}
	p.Replicas[2].Outstanding = 2
	c := p.Pick(now, nil, 0)
	if c.Replica != nil || !c.Shed {
		t.Fatalf("every replica at its limit: got %+v, want shed", c)
	}
	// A stale queue report is ignored.
	if c := p.Pick(now.Add(6*time.Second), nil, 0); c.Replica == nil || c.Replica.Name != "b" {
		t.Fatalf("stale load still counted: %+v", c)
	}
	p.MarkOverloaded(p.Replicas[1], now.Add(2*time.Second), "engine 429")
	if st := p.Replicas[1].StateAt(now.Add(time.Second), Limits{}); st != Overloaded {
		t.Fatalf("state %v after an engine 429", st)
	}
}

func TestAffinityIsBoundedByLoad(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	p.Limits.AffinityBound = 2
	key := AffinityKey("a long shared system prompt that many requests begin with.......", 32)
	first := p.Pick(now, nil, key).Replica
	for i := 0; i < 10; i++ {
		if r := p.Pick(now, nil, key).Replica; r != first {
			t.Fatalf("affinity moved from %s to %s with no load", first.Name, r.Name)
		}
	}
	// Load the preferred replica beyond the bound: the request spills to the other.
	first.Outstanding = 5
	if r := p.Pick(now, nil, key).Replica; r == first {
		t.Fatalf("affinity kept %s at load %d", r.Name, first.score())
	}
	if AffinityKey("short", 32) != 0 {
		t.Fatal("a short prompt has no affinity")
	}
}

// A replica whose cache is not trusted is never preferred by affinity, yet still serves.
func TestAffinitySkipsUntrustedCache(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	p.Limits.AffinityBound = 2
	var key uint64
	for i := 0; key == 0 || p.Pick(now, nil, key).Replica.Name != "a"; i++ {
		key = AffinityKey(fmt.Sprintf("%64d", i), 32) // a key that prefers a
	}
	p.Replicas[0].Outstanding = 1 // a is busier: only affinity chooses it
	if r := p.Pick(now, nil, key).Replica; r.Name != "a" {
		t.Fatalf("picked %s: affinity did not hold within its bound", r.Name)
	}
	p.Replicas[0].NoAffinity = true
	if r := p.Pick(now, nil, key).Replica; r.Name != "b" {
		t.Fatalf("picked %s: affinity still counts on a's cache", r.Name)
	}
	if r := p.Pick(now, names("b"), key).Replica; r.Name != "a" {
		t.Fatalf("picked %v: a replica without affinity still serves", r)
	}
	// Cache-aware placement does not count on what its record holds either.
	p.Limits.CacheAware = true
	blocks := PrefixBlocks(0, prompt(8*PrefixBlockBytes, 3))
	for _, r := range p.Replicas {
		r.Prefix = NewPrefixRecord(100)
	}
	p.Replicas[0].Prefix.Insert(blocks)
	p.Replicas[0].NoAffinity = false
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != "a" {
		t.Fatalf("picked %s: the record of a's prompts did not count", r.Name)
	}
	p.Replicas[0].NoAffinity = true
	if r := p.PickPrompt(now, nil, 0, blocks).Replica; r.Name != "b" {
		t.Fatalf("picked %s: the record of an untrusted cache still counts", r.Name)
	}
}

func TestStatesAndProbe(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	a := p.Find("a")
	p.MarkDialFailed(a, now, "connection refused")
	if a.StateAt(now, p.Limits) != Dead || a.StateAt(now.Add(9*time.Second), p.Limits) == Healthy {
		t.Fatal("a replica whose dial failed must stay out for the cooldown")
	}
	if a.StateAt(now.Add(10*time.Second), p.Limits) != Healthy {
		t.Fatal("the cooldown must end")
	}
	p.MarkDialFailed(a, now, "connection refused")
	p.ProbeResult(a, true, "")
	if a.StateAt(now, p.Limits) != Healthy {
		t.Fatal("a successful probe must bring the replica back at once")
	}
	p.ProbeResult(a, false, "probe: 500")
	if a.StateAt(now, p.Limits) != Unhealthy || a.Reason() != "probe: 500" {
		t.Fatal("a failed probe must take the replica out")
	}
	b := p.Find("b")
	p.SetDraining(b, true, "operator")
	if b.StateAt(now, p.Limits) != Draining {
		t.Fatal("draining")
	}
	p.SetIncompatible(p.Find("backup"), "block_size: configured 16, engine reports 32")
	if s := p.Find("backup").StateAt(now, p.Limits); s != Incompatible || p.Find("backup").Reason() == "" {
		t.Fatalf("state %v", s)
	}
	if c := p.Pick(now, nil, 0); c.Replica != nil {
		t.Fatalf("picked %s", c.Replica.Name)
	}
}

func TestCompatible(t *testing.T) {
	x := &Replica{Fingerprint: map[string]string{"revision": "r1", "block_size": "16"}}
	y := &Replica{Fingerprint: map[string]string{"revision": "r1", "block_size": "16"}}
	z := &Replica{Fingerprint: map[string]string{"revision": "r2", "block_size": "16"}}
	if !Compatible(x, y) || Compatible(x, z) || Compatible(x, &Replica{}) {
		t.Fatal("fingerprint equality")
	}
}

func TestAddAndRemove(t *testing.T) {
	now := time.Unix(0, 0)
	p := Pool{Model: "m"}
	p.Add(&Replica{Name: "a"}, true)
	late := &Replica{Name: "b"}
	p.Add(late, false)
	if st := late.StateAt(now, p.Limits); st != Unhealthy || late.Reason() == "" {
		t.Fatalf("a joining replica is %v (%q) before its first probe", st, late.Reason())
	}
	p.ProbeResult(late, true, "")
	if st := late.StateAt(now, p.Limits); st != Healthy {
		t.Fatalf("after a passing probe: %v", st)
	}
	if !p.Remove("a") || p.Remove("a") || len(p.Replicas) != 1 || p.Find("b") != late {
		t.Fatalf("replicas %v", p.Replicas)
	}
}

// A replica's capacity is max_outstanding when set, else the slots its engine reports:
// at that many of this gateway's attempts it takes no more.
func TestCapacityFromEngineSlots(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	a := p.Replicas[0]
	a.Slots, a.Outstanding = 2, 2
	if st := a.StateAt(now, p.Limits); st != Overloaded {
		t.Fatalf("a at its engine's 2 slots is %s, want overloaded", st)
	}
	a.Outstanding = 1
	if st := a.StateAt(now, p.Limits); st != Healthy {
		t.Fatalf("a with a slot free is %s", st)
	}
	p.Limits.MaxOutstanding = 1 // the configuration wins
	if st := a.StateAt(now, p.Limits); st != Overloaded || p.Limits.Capacity(a) != 1 {
		t.Fatalf("a at max_outstanding 1 is %s, capacity %d", st, p.Limits.Capacity(a))
	}
	if p.Limits.MaxOutstanding = 0; p.Limits.Capacity(p.Replicas[1]) != 0 {
		t.Fatal("a replica whose engine says nothing has a capacity")
	}
}
