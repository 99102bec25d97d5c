package canary

import (
	"slices"
	"strings"
	"testing"
)

func TestCacheLengths(t *testing.T) {
	for _, c := range []struct {
		block  int
		blocks []int
		want   []int
	}{
		{16, []int{1, 2}, []int{31, 33, 47, 49}}, // 16−1 is too short: shifted by a block
		{32, []int{1, 2}, []int{31, 33, 63, 65}},
		{1, []int{1, 2}, []int{16, 17, 18, 19}}, // SGLang's page size 1: every token is an edge
		{128, []int{2, 1, 1}, []int{127, 129, 255, 257}},
		{0, []int{1}, nil},
	} {
		if got := CacheLengths(c.block, c.blocks); !slices.Equal(got, c.want) {
			t.Errorf("block %d, blocks %v: %v, want %v", c.block, c.blocks, got, c.want)
		}
	}
}

func TestJudgeCacheRounds(t *testing.T) {
	o := Options{CompareTokens: 3}
	same := Pair{Length: 31, Cold: words(" a b c"), Warm: words(" a b c")}
	differs := Pair{Length: 33, Cold: words(" a b c"), Warm: words(" a x c")}
	failed := Pair{Length: 47, Cold: words(" a"), Warm: Answer{Err: "timeout"}}

	if v := JudgeCacheRounds(JudgeCache([]Pair{same}, o), CacheVote{}, 16); v.State != Agrees {
		t.Fatalf("all same: %+v", v)
	}
	if v := JudgeCacheRounds(JudgeCache([]Pair{same, failed}, o), CacheVote{}, 16); v.State != Unknown || !strings.Contains(v.Detail, "47 tokens, warm: timeout") {
		t.Fatalf("a failed pair: %+v", v)
	}
	first := JudgeCache([]Pair{same, differs}, o)
	if len(first.Differing) != 1 || first.Differing[0].Position != 1 {
		t.Fatalf("first round %+v", first)
	}
	v := JudgeCacheRounds(first, JudgeCache([]Pair{differs}, o), 16)
	if v.State != CacheDiverges || v.Evidence == nil || v.Evidence.Length != 33 ||
		!strings.Contains(v.Detail, "33 tokens (block size 16)") || !strings.Contains(v.Detail, "token 1 differs") ||
		!strings.Contains(v.Detail, `cold answer "a b c", warm answer "a x c"`) {
		t.Fatalf("differs twice: %+v", v)
	}
	// Once only: forgiven, as batch-size effects are.
	if v := JudgeCacheRounds(first, JudgeCache([]Pair{{Length: 33, Cold: words(" a b c"), Warm: words(" a b c")}}, o), 16); v.State != Agrees || !strings.Contains(v.Detail, "once") {
		t.Fatalf("differs once: %+v", v)
	}
	if v := JudgeCacheRounds(first, JudgeCache([]Pair{{Length: 33, Cold: Answer{Err: "refused"}}}, o), 16); v.State != Unknown {
		t.Fatalf("differs once, then fails: %+v", v)
	}
}

// The fit finds the cut of an exact token count against tokenizers of different grain, and
// says when none exists.
func TestPromptFit(t *testing.T) {
	byteTokens := func(s string) int { return len(s) } // byte fallback: a token a byte
	wordTokens := func(s string) int { return len(strings.Fields(s)) }
	twoByteTokens := func(s string) int { return 2 * len(s) } // every count is even
	// Subwords: every word of the filler, whole or cut, is two tokens, the nonce and a
	// comma one each, so that no cut of the filler counts an even number: only padding
	// reaches one.
	subwordTokens := func(s string) int {
		n := 0
		for i, w := range strings.Fields(s) {
			switch {
			case i == 0 || w == ",":
				n++
			default:
				n += 2
			}
		}
		return n
	}
	// Lumpy bytes, as a small model's vocabulary can be: a letter two tokens, a space one,
	// a comma three, anything else one. Cuts of the filler skip counts, and " ," pads by
	// four: "." has to make up the rest.
	lumpyTokens := func(s string) int {
		n := 0
		for _, r := range s {
			switch {
			case r >= 'a' && r <= 'z':
				n += 2
			case r == ',':
				n += 3
			default:
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name   string
		nonce  string
		count  func(string) int
		target int
		found  bool
	}{
		{"bytes", "n0nce", byteTokens, 33, true},
		{"bytes, long", "n0nce", byteTokens, 513, true},
		{"words", "n0nce", wordTokens, 31, true},
		{"words, long", "n0nce", wordTokens, 257, true},
		{"even only", "n0nce", twoByteTokens, 33, false},
		{"subwords, odd", "n0nce", subwordTokens, 33, true},
		{"subwords, even: padded", "n0nce", subwordTokens, 32, true},
		{"subwords, even, long: padded", "n0nce", subwordTokens, 48, true},
		{"lumpy, 31", "1a2b3c4d:", lumpyTokens, 31, true},
		{"lumpy, 49", "1a2b3c4d:", lumpyTokens, 49, true},
		{"lumpy, 50", "1a2b3c4d:", lumpyTokens, 50, true},
		{"nonce alone too long", "a b c", wordTokens, 2, false},
	} {
		f := NewPromptFit(c.target)
		calls := 0
		for !f.Done {
			f.Observe(c.count(f.Prompt(c.nonce)))
			calls++
		}
		if f.Found != c.found || (f.Found && c.count(f.Prompt(c.nonce)) != c.target) || calls > maxFitTries+padTries {
			t.Errorf("%s: found %v at cut %d after %d calls", c.name, f.Found, f.Cut, calls)
		}
	}
	if p := CachePrompt("abc", 300); !strings.HasPrefix(p, "abc one two") || len(p) > 304 {
		t.Errorf("prompt %q", p)
	}
}
