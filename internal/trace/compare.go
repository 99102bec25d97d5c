package trace

import (
	"fmt"
	"slices"
	"strings"
)

// Verdict is how a replay's answer compares with what the client received.
type Verdict string

const (
	// Identical: the same text in every choice, the same finishes, the same end.
	Identical Verdict = "identical"
	// SamePoint: the same text, and both stopped short of a complete answer (both cut, or
	// both ended in an error): the replay reproduced the failure where it happened.
	SamePoint Verdict = "same_point"
	// Extends: what the client received is a prefix of the replay's answer, and the client's
	// did not complete (it was interrupted): the replay went on where the original stopped.
	Extends Verdict = "extends"
	// StopsEarlier: the replay's text is a prefix of what the client received, and the
	// replay did not complete.
	StopsEarlier Verdict = "stops_earlier"
	// Diverges: the texts differ (or a complete answer was followed by a different one).
	Diverges Verdict = "diverges"
	// Unknown: part of the original was kept only as hashes past the trace's size limit,
	// and the kept part agrees.
	Unknown Verdict = "unknown"
)

// Comparison is the result of Compare.
type Comparison struct {
	Verdict Verdict `json:"verdict"`
	// Choice and Offset locate the first difference (byte offset in the choice's text),
	// for Diverges, Extends and StopsEarlier.
	Choice int `json:"choice"`
	Offset int `json:"offset"`
	// Original and Replay are a few characters of each text around the difference.
	Original    string `json:"original,omitempty"`
	Replay      string `json:"replay,omitempty"`
	OriginalEnd End    `json:"original_end"`
	ReplayEnd   End    `json:"replay_end"`
	Detail      string `json:"detail"`
}

// Agrees reports whether the replay is consistent with what the client received: the same
// answer, the same failure at the same point, or the answer the client's interruption cut
// short.
func (c Comparison) Agrees() bool {
	return c.Verdict == Identical || c.Verdict == SamePoint || c.Verdict == Extends
}

// Compare compares what the client received (original) with what a replay received.
func Compare(original, replay *Transcript) Comparison {
	c := Comparison{OriginalEnd: original.End, ReplayEnd: replay.End}
	choices := map[int]bool{}
	for i := range original.Choices {
		choices[i] = true
	}
	for i := range replay.Choices {
		choices[i] = true
	}
	order := make([]int, 0, len(choices))
	for i := range choices {
		order = append(order, i)
	}
	slices.Sort(order)

	// The relation of the texts, choice by choice: equal, or one a prefix of the other.
	origLonger, replayLonger := false, false
	for _, i := range order {
		o, r := original.text(i), replay.text(i)
		if o == r {
			continue
		}
		k := commonPrefix(o, r)
		switch {
		case k == len(o) && !original.Hashed:
			replayLonger = true
		case k == len(r):
			origLonger = true
		case original.Hashed && k == len(o):
			// The original's text stops where hashes begin: the rest is unknown.
		default:
			return c.diverge(i, k, o, r, "the texts differ")
		}
		if origLonger && replayLonger {
			return c.diverge(i, k, o, r, "one choice is longer in the original, another in the replay")
		}
		if c.Verdict == "" {
			c.Choice, c.Offset = i, k
			c.Original, c.Replay = around(o, k), around(r, k)
		}
	}
	complete := func(e End) bool { return e == EndComplete }
	switch {
	case original.Hashed:
		c.Verdict, c.Detail = Unknown, "the original was kept only in part (past the trace's size limit); the kept part agrees"
	case replayLonger:
		if complete(original.End) {
			return c.diverge(c.Choice, c.Offset, original.text(c.Choice), replay.text(c.Choice), "the original completed, the replay went on")
		}
		c.Verdict = Extends
		c.Detail = fmt.Sprintf("the client's answer (ended: %s) is a prefix of the replay's (ended: %s)", original.End, replay.End)
	case origLonger:
		if complete(replay.End) {
			return c.diverge(c.Choice, c.Offset, original.text(c.Choice), replay.text(c.Choice), "the replay completed shorter")
		}
		c.Verdict = StopsEarlier
		c.Detail = fmt.Sprintf("the replay (ended: %s) stopped before the client's answer did (ended: %s)", replay.End, original.End)
	case original.End == replay.End && complete(original.End):
		if !sameFinishes(original, replay) {
			return c.diverge(0, 0, "", "", fmt.Sprintf("finish reasons differ: %v, replay %v", original.Finish, replay.Finish))
		}
		c.Verdict, c.Detail = Identical, "the same answer"
	case !complete(original.End) && !complete(replay.End):
		c.Verdict = SamePoint
		c.Detail = fmt.Sprintf("the same text, and both stopped short (original: %s, replay: %s)", original.End, replay.End)
	case complete(replay.End):
		// The original stopped short, the replay completed with nothing more to say.
		c.Verdict = Extends
		c.Detail = fmt.Sprintf("the replay completed where the client's answer ended (%s)", original.End)
	default:
		c.Verdict = StopsEarlier
		c.Detail = fmt.Sprintf("the same text, but the replay ended (%s) where the client's answer completed", replay.End)
	}
	return c
}

func (c Comparison) diverge(choice, k int, o, r, why string) Comparison {
	c.Verdict, c.Choice, c.Offset = Diverges, choice, k
	c.Original, c.Replay = around(o, k), around(r, k)
	c.Detail = why
	if o != "" || r != "" {
		c.Detail = fmt.Sprintf("%s: choice %d, at byte %d", why, choice, k)
	}
	return c
}

func sameFinishes(a, b *Transcript) bool {
	if len(a.Finish) != len(b.Finish) {
		return false
	}
	for i, f := range a.Finish {
		if b.Finish[i] != f {
			return false
		}
	}
	return true
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// around returns up to 24 bytes of s before k and 24 from k, with a marker at k.
func around(s string, k int) string {
	from, to := max(0, k-24), min(len(s), k+24)
	var b strings.Builder
	if from > 0 {
		b.WriteString("…")
	}
	b.WriteString(s[from:k])
	b.WriteString("⟨here⟩")
	b.WriteString(s[k:to])
	if to < len(s) {
		b.WriteString("…")
	}
	return b.String()
}
