package canary

import (
	"slices"
	"strings"
	"testing"
)

func words(s string) Answer { return Answer{Text: s} }

func TestCompare(t *testing.T) {
	o := Options{CompareTokens: 4}
	cases := []struct {
		a, b Answer
		same bool
		pos  int
	}{
		{words(" one two three four five"), words(" one two three four six"), true, -1}, // differs past the compared tokens
		{words(" one two three four"), words(" one two tree four"), false, 2},
		{words(" one two"), words(" one two three"), false, 2}, // one answer stopped early
		{words(""), words(""), true, -1},
		{Answer{Tokens: []string{"a", "b"}, Text: "ab"}, Answer{Tokens: []string{"a", "c"}, Text: "ac"}, false, 1},
	}
	for _, c := range cases {
		d := Compare(c.a, c.b, o)
		if d.Same != c.same || d.Position != c.pos {
			t.Errorf("%q vs %q: %+v, want same=%v at %d", c.a.Text, c.b.Text, d, c.same, c.pos)
		}
	}
	// Logprobs decide only when asked to and when both engines give them.
	a := Answer{Tokens: []string{"x", "y"}, Logprobs: []float64{-0.1, -0.2}}
	b := Answer{Tokens: []string{"x", "y"}, Logprobs: []float64{-1.5, -2.2}}
	if !Compare(a, b, o).Same {
		t.Error("logprobs compared without a limit")
	}
	if d := Compare(a, b, Options{CompareTokens: 2, MaxLogprobDistance: 0.5}); d.Same || !strings.Contains(d.Detail, "logprobs") {
		t.Errorf("logprobs far apart: %+v", d)
	}
	if !Compare(a, Answer{Tokens: []string{"x", "y"}, Logprobs: []float64{-0.12, -0.25}}, Options{CompareTokens: 2, MaxLogprobDistance: 0.5}).Same {
		t.Error("logprobs within the limit failed")
	}
}

func TestJudge(t *testing.T) {
	o := Options{CompareTokens: 3}
	v := Judge(map[string]Answer{
		"a": words(" one two three"), "b": words(" one two three"), "c": words(" one too three"), "d": {Err: "timeout"},
	}, o)
	if v.Tie || !slices.Equal(v.Majority, []string{"a", "b"}) || v.Reference != "a" || len(v.Dissent) != 1 ||
		v.Dissent["c"].Position != 1 || !slices.Equal(v.Failed, []string{"d"}) {
		t.Fatalf("vote %+v", v)
	}
	if e := Evidence(v.Dissent["c"], words(" one too three"), words(" one two three")); !strings.Contains(e, "token 1") || !strings.Contains(e, "one too three") {
		t.Fatalf("evidence %q", e)
	}
	// Two replicas that disagree: no majority, both dissent.
	v = Judge(map[string]Answer{"a": words(" x"), "b": words(" y")}, o)
	if !v.Tie || len(v.Majority) != 0 || len(v.Dissent) != 2 || v.Dissent["a"].Same || v.Dissent["b"].Same {
		t.Fatalf("tie %+v", v)
	}
	// Everyone agrees; and nobody answered.
	if v := Judge(map[string]Answer{"a": words(" x"), "b": words(" x"), "c": words(" x")}, o); len(v.Majority) != 3 || len(v.Dissent) != 0 {
		t.Fatalf("agreement %+v", v)
	}
	if v := Judge(map[string]Answer{"a": {Err: "x"}}, o); len(v.Majority) != 0 || v.Tie || len(v.Failed) != 1 {
		t.Fatalf("no answers %+v", v)
	}
	// The vote does not depend on the order answers arrive in.
	for range 20 {
		v := Judge(map[string]Answer{"p": words(" b"), "q": words(" a"), "r": words(" a"), "s": words(" b"), "t": words(" a")}, o)
		if !slices.Equal(v.Majority, []string{"q", "r", "t"}) {
			t.Fatalf("majority %v", v.Majority)
		}
	}
}
