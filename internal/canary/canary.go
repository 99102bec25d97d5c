// Package canary decides whether replicas that claim the same fingerprint answer alike, and
// whether a replica answers alike with and without its prefix cache (cache.go): given
// each replica's answer to one fixed greedy probe, it finds the group's majority answer and
// says who disagrees with it and where (docs/design.md §3). A fingerprint is what engines
// and configuration say; the canary is what the replicas do, and it catches what no engine
// reports (weights swapped under the same path, a template edited in place).
//
// It is pure: no I/O, no clock, no goroutines. It imports no other fencegate package.
package canary

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// States of a replica's canary.
const (
	Agrees   = "agrees"   // its answer is its group's majority answer
	Diverges = "diverges" // its answer differed from the majority, also on a second try
	Unknown  = "unknown"  // not checked, alone in its group, or its probe failed
)

// Answer is one replica's answer to the probe.
type Answer struct {
	Text string
	// Tokens and Logprobs are the answer's tokens and their log probabilities, when the
	// engine returned logprobs; without them the text is split into words.
	Tokens   []string
	Logprobs []float64
	// Err says why the probe got no answer; such an answer takes no part in the vote.
	Err string
}

// Options decide when two answers are the same.
type Options struct {
	// CompareTokens: only this many leading tokens are compared (engines are not bitwise
	// deterministic across batch sizes, and a long greedy answer may drift late).
	CompareTokens int
	// MaxLogprobDistance, when above 0, also fails answers whose compared tokens are equal
	// but whose logprobs differ by more than this on average.
	MaxLogprobDistance float64
}

var wordPattern = regexp.MustCompile(`\s*\S+`)

// tokens returns the answer's tokens: the engine's, or its words with their leading space.
func (a Answer) tokens() []string {
	if len(a.Tokens) > 0 {
		return a.Tokens
	}
	return wordPattern.FindAllString(a.Text, -1)
}

// Difference is where two answers part.
type Difference struct {
	Same bool
	// Position is the index of the first differing token (-1 when the tokens agree and
	// the logprobs do not).
	Position int
	Detail   string
}

// Compare compares the first o.CompareTokens tokens of a and b, then their logprobs.
func Compare(a, b Answer, o Options) Difference {
	ta, tb := a.tokens(), b.tokens()
	n := o.CompareTokens
	if n <= 0 {
		n = max(len(ta), len(tb))
	}
	for i := range n {
		var x, y string
		okx, oky := i < len(ta), i < len(tb)
		if okx {
			x = ta[i]
		}
		if oky {
			y = tb[i]
		}
		if !okx && !oky {
			break
		}
		if okx != oky || x != y {
			return Difference{Position: i, Detail: fmt.Sprintf("token %d differs: %q vs %q", i, x, y)}
		}
	}
	if o.MaxLogprobDistance > 0 && len(a.Logprobs) > 0 && len(b.Logprobs) > 0 {
		m := min(n, len(a.Logprobs), len(b.Logprobs))
		sum := 0.0
		for i := range m {
			sum += math.Abs(a.Logprobs[i] - b.Logprobs[i])
		}
		if m > 0 && sum/float64(m) > o.MaxLogprobDistance {
			return Difference{Position: -1, Detail: fmt.Sprintf("same tokens, logprobs %.3g apart on average (limit %.3g)", sum/float64(m), o.MaxLogprobDistance)}
		}
	}
	return Difference{Same: true, Position: -1}
}

// Vote is the outcome of one group's probe.
type Vote struct {
	// Majority names the replicas holding the answer most replicas gave, when one answer
	// is held by more replicas than any other; Reference is one of them.
	Majority  []string
	Reference string
	// Dissent maps each replica whose answer differs from the majority to how. With no
	// majority (a tie), every answering replica is in it, compared with the first of the
	// largest answers.
	Dissent map[string]Difference
	// Tie: no answer is held by more replicas than another.
	Tie bool
	// Failed names the replicas whose probe got no answer.
	Failed []string
}

// Judge groups the answers of replicas that claim one fingerprint by sameness and finds the
// majority. Clusters are formed in name order, each answer joining the first cluster whose
// first answer it matches, so the result does not depend on map order.
func Judge(answers map[string]Answer, o Options) Vote {
	names := make([]string, 0, len(answers))
	for n := range answers {
		names = append(names, n)
	}
	sort.Strings(names)
	var v Vote
	var clusters [][]string
	for _, n := range names {
		a := answers[n]
		if a.Err != "" {
			v.Failed = append(v.Failed, n)
			continue
		}
		joined := false
		for i, c := range clusters {
			if Compare(answers[c[0]], a, o).Same {
				clusters[i] = append(c, n)
				joined = true
				break
			}
		}
		if !joined {
			clusters = append(clusters, []string{n})
		}
	}
	v.Dissent = map[string]Difference{}
	if len(clusters) == 0 {
		return v
	}
	sort.SliceStable(clusters, func(i, j int) bool { return len(clusters[i]) > len(clusters[j]) })
	ref := clusters[0][0]
	v.Tie = len(clusters) > 1 && len(clusters[1]) == len(clusters[0])
	if v.Tie {
		// No answer can be called right: each replica is compared with an answer of
		// another cluster, so that the evidence shows the split.
		for ci, c := range clusters {
			against := ref
			if ci == 0 {
				against = clusters[1][0]
			}
			for _, n := range c {
				v.Dissent[n] = Compare(answers[against], answers[n], o)
			}
		}
		return v
	}
	v.Majority, v.Reference = clusters[0], ref
	for _, c := range clusters[1:] {
		for _, n := range c {
			v.Dissent[n] = Compare(answers[ref], answers[n], o)
		}
	}
	return v
}

// Evidence is the line that says how a replica's answer differs from the reference answer.
func Evidence(d Difference, got, reference Answer) string {
	return fmt.Sprintf("%s; answer %q, majority %q", d.Detail, short(got.Text), short(reference.Text))
}

func short(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
