package balance

import (
	"testing"
	"time"
)

func pool() *Pool {
	return &Pool{Model: "m", Cooldown: 10 * time.Second, Replicas: []*Replica{
		{Name: "a"}, {Name: "b"}, {Name: "backup", Priority: 1},
	}}
}

func TestPickLeastOutstandingLowestTier(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	p.Replicas[0].Outstanding = 3
	p.Replicas[1].Outstanding = 1
	p.Replicas[2].Outstanding = 0
	if r := p.Pick(now, nil); r.Name != "b" {
		t.Fatalf("picked %s, want b (least outstanding in tier 0; the idle backup is tier 1)", r.Name)
	}
	if r := p.Pick(now, func(n string) bool { return n == "b" }); r.Name != "a" {
		t.Fatalf("picked %s, want a", r.Name)
	}
	if r := p.Pick(now, func(n string) bool { return n != "backup" }); r.Name != "backup" {
		t.Fatalf("picked %v, want the backup tier once tier 0 is excluded", r)
	}
	if r := p.Pick(now, func(string) bool { return true }); r != nil {
		t.Fatalf("picked %s with everything excluded", r.Name)
	}
}

func TestDialFailureCooldownAndProbe(t *testing.T) {
	p, now := pool(), time.Unix(1000, 0)
	a := p.Find("a")
	p.MarkDialFailed(a, now, "connection refused")
	if a.StateAt(now) != Dead || a.Available(now.Add(9*time.Second)) {
		t.Fatal("a replica whose dial failed must stay out for the cooldown")
	}
	if !a.Available(now.Add(10 * time.Second)) {
		t.Fatal("the cooldown must end")
	}
	p.ProbeResult(a, true, "")
	if !a.Available(now) {
		t.Fatal("a successful probe must bring the replica back at once")
	}
	p.ProbeResult(a, false, "probe: 500")
	if a.StateAt(now) != Unhealthy || a.Reason() != "probe: 500" || p.Pick(now, func(n string) bool { return n == "b" }).Name != "backup" {
		t.Fatal("a failed probe must take the replica out")
	}
	p.MarkDead(p.Find("b"), now, time.Minute, "orchestrator")
	p.MarkDead(p.Find("backup"), now, time.Minute, "orchestrator")
	if p.AnyAvailable(now) {
		t.Fatal("no replica should be available")
	}
}
