package balance

import "time"

// State is what the pool believes of a replica.
type State uint8

const (
	Healthy State = iota
	// Dead: a dial failed or the replica was declared gone; no new work until DeadUntil
	// passes or a probe succeeds. Also: ejected after consecutive failed attempts, until
	// the ejection ends (a probe does not end it).
	Dead
	// Unhealthy: the last active probe failed (the replica may still be finishing streams).
	Unhealthy
	// Overloaded: the engine rejected work (429/503) recently, or its queue is at the limit.
	// It gets no new work, but it is not failed over: its streams go on.
	Overloaded
	// Draining: an operator asked for no new work; running streams finish.
	Draining
	// Incompatible: the engine's fingerprint does not match the configuration.
	Incompatible
)

var stateNames = [...]string{Healthy: "healthy", Dead: "dead", Unhealthy: "unhealthy", Overloaded: "overloaded",
	Draining: "draining", Incompatible: "incompatible"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Load is what the engine last reported of itself (scraped metrics or an agent heartbeat).
type Load struct {
	Running int
	Waiting int
	// KVUsage is the fraction of the KV cache in use, 0..1.
	KVUsage float64
	At      time.Time
}

// Replica is one member of a pool.
type Replica struct {
	Name     string
	URL      string
	Priority int
	// Fingerprint is what makes two replicas' outputs interchangeable (weights revision,
	// quantization, tokenizer, chat template, KV dtype, parallelism, block size, LoRA
	// adapters). A rerun goes only to a replica with an equal fingerprint.
	Fingerprint map[string]string

	// Outstanding is the number of attempts this gateway has in flight on the replica;
	// PeakOutstanding the most it ever had at once.
	Outstanding     int
	PeakOutstanding int
	Load            Load
	// NoAffinity: prefix affinity never prefers the replica, whose cache is not trusted
	// (the canary found it changing answers).
	NoAffinity bool
	// Slots is how many requests the engine says it decodes at once (llama.cpp's
	// total_slots, SGLang's max_running_requests; 0: it does not say): the replica's
	// capacity when the pool sets no MaxOutstanding.
	Slots int
	// Prefix is the record of the prompt blocks the replica was sent, which the
	// cache-aware policy matches prompts against (nil: none kept).
	Prefix *PrefixRecord

	deadUntil       time.Time
	overloadedUntil time.Time
	probeFailed     bool
	draining        bool
	incompatible    string
	lastReason      string

	// failures counts the attempts that failed because of the replica since its last
	// completed one (or its last ejection).
	failures int
	// ejectedUntil ends the current (or last) ejection, ejectReason says why it began;
	// ejections is how many earlier ejections lengthen the next one (at most maxEjectShift).
	ejectedUntil time.Time
	ejectReason  string
	ejections    int
}

// StateAt reports the replica's state at now, given the pool's limits.
func (r *Replica) StateAt(now time.Time, lim Limits) State {
	switch {
	case r.incompatible != "":
		return Incompatible
	case now.Before(r.deadUntil), now.Before(r.ejectedUntil):
		return Dead
	case r.probeFailed:
		return Unhealthy
	case r.draining:
		return Draining
	case now.Before(r.overloadedUntil), lim.full(r, now):
		return Overloaded
	}
	return Healthy
}

// AvailableAt is when a replica that is dead after a dial failure, ejected, or overloaded
// after an engine's "busy" is expected back (zero when it is not waiting out any of them).
func (r *Replica) AvailableAt(now time.Time) time.Time {
	t := time.Time{}
	dead := r.deadUntil
	if r.ejectedUntil.After(dead) {
		dead = r.ejectedUntil
	}
	for _, u := range []time.Time{dead, r.overloadedUntil} {
		if now.Before(u) && (t.IsZero() || u.Before(t)) {
			t = u
		}
	}
	return t
}

// Reason is why the replica was last taken out of rotation ("" when healthy). It does not
// know whether an ejection still holds: ReasonAt does.
func (r *Replica) Reason() string {
	if r.incompatible != "" {
		return r.incompatible
	}
	return r.lastReason
}

// ReasonAt is why the replica is out of rotation at now: while it is ejected, the ejection's
// reason (a passing probe clears the last reason but not an ejection).
func (r *Replica) ReasonAt(now time.Time) string {
	if r.incompatible == "" && now.Before(r.ejectedUntil) {
		return r.ejectReason
	}
	return r.Reason()
}

// Ejected reports whether the replica is ejected at now, and until when.
func (r *Replica) Ejected(now time.Time) (bool, time.Time) {
	return now.Before(r.ejectedUntil), r.ejectedUntil
}

// ConsecutiveFailures is the number of attempts that failed because of the replica since
// its last completed one or its last ejection.
func (r *Replica) ConsecutiveFailures() int { return r.failures }

// score orders replicas by load, lowest first: what this gateway has in flight or what the
// engine reports running, whichever is more (other gateways share the engine), plus the
// engine's queue counted twice, since a queued request waits for all of it.
func (r *Replica) score() int {
	return max(r.Outstanding, r.Load.Running+r.Load.Waiting) + r.Load.Waiting
}
