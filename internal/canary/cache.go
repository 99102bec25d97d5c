package canary

import (
	"fmt"
	"slices"
	"strings"
)

// The cache check (docs/design.md §3): a replica answers the same greedy prompt twice, cold
// (a fresh nonce at its start, so no block of it is cached) and warm (right after, its
// prefix now cached), at prompt lengths on both sides of a multiple of the engine's KV
// block size. A correct cache changes no answer; one that does is cache_diverges.

// CacheDiverges: the replica's answer changed once the prompt's prefix came from its cache.
const CacheDiverges = "cache_diverges"

// MinCacheTokens is the shortest prompt the cache check sends: room for the nonce and some
// text after it, whatever the block size (SGLang's page size is often 1).
const MinCacheTokens = 16

// CacheLengths are the prompt lengths, in tokens, of the cache check: for each multiple k of
// blocks, k·block−1 (the cache ends a block before the prompt's last full block) and k·block+1
// (it ends exactly at the block edge before the last token). Blocks too small for
// MinCacheTokens are shifted up by whole blocks, so every length still straddles an edge.
// Sorted, without duplicates.
func CacheLengths(block int, blocks []int) []int {
	if block <= 0 {
		return nil
	}
	shift := 0
	for shift+block-1 < MinCacheTokens {
		shift += block
	}
	var out []int
	for _, k := range blocks {
		if k <= 0 {
			continue
		}
		edge := shift + k*block
		out = append(out, edge-1, edge+1)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Pair is a replica's cold and warm answers to one prompt of Length tokens.
type Pair struct {
	Length     int
	Cold, Warm Answer
}

// PairResult is how a pair compares.
type PairResult struct {
	Pair
	Difference
}

// CacheVote is the outcome of one round of a replica's pairs.
type CacheVote struct {
	// Differing holds the pairs whose warm answer differs from the cold one, shortest first.
	Differing []PairResult
	// Failed says why a pair got no answer ("" when all did); such a pair is not judged.
	Failed string
}

// JudgeCache compares each pair's warm answer with its cold one.
func JudgeCache(pairs []Pair, o Options) CacheVote {
	var v CacheVote
	for _, p := range pairs {
		switch {
		case p.Cold.Err != "":
			v.Failed = fmt.Sprintf("%d tokens, cold: %s", p.Length, p.Cold.Err)
			continue
		case p.Warm.Err != "":
			v.Failed = fmt.Sprintf("%d tokens, warm: %s", p.Length, p.Warm.Err)
			continue
		}
		if d := Compare(p.Cold, p.Warm, o); !d.Same {
			v.Differing = append(v.Differing, PairResult{p, d})
		}
	}
	slices.SortFunc(v.Differing, func(a, b PairResult) int { return a.Length - b.Length })
	return v
}

// CacheVerdict is a replica's cache state after a round and, when pairs differed, a second
// round at the lengths that differed (with a fresh nonce): engines are not bitwise
// deterministic across batch sizes, so one differing pair alone proves nothing.
type CacheVerdict struct {
	State    string // Agrees, CacheDiverges or Unknown
	Block    int    // the block size the lengths straddled
	Detail   string
	Evidence *PairResult // the pair that differed twice, when CacheDiverges
}

// JudgeCacheRounds decides the verdict from the first round and the second (ignored when
// nothing differed in the first).
func JudgeCacheRounds(first, again CacheVote, block int) CacheVerdict {
	v := judgeCacheRounds(first, again, block)
	v.Block = block
	return v
}

func judgeCacheRounds(first, again CacheVote, block int) CacheVerdict {
	if len(first.Differing) == 0 {
		if first.Failed != "" {
			return CacheVerdict{State: Unknown, Detail: "cache check failed: " + first.Failed}
		}
		return CacheVerdict{State: Agrees}
	}
	for _, d := range again.Differing {
		if slices.ContainsFunc(first.Differing, func(f PairResult) bool { return f.Length == d.Length }) {
			return CacheVerdict{State: CacheDiverges, Evidence: &d, Detail: CacheEvidence(d, block)}
		}
	}
	if again.Failed != "" {
		return CacheVerdict{State: Unknown, Detail: fmt.Sprintf("cache check: the %d-token pair differed once, and asking again failed: %s",
			first.Differing[0].Length, again.Failed)}
	}
	return CacheVerdict{State: Agrees, Detail: "cache check: a pair differed once, agreed when probed again"}
}

// CacheEvidence is the line that says how a replica's warm answer differs from its cold one.
func CacheEvidence(p PairResult, block int) string {
	return fmt.Sprintf("answer changed when the prompt came from its cache: prompt of %d tokens (block size %d), %s; cold answer %q, warm answer %q",
		p.Length, block, p.Detail, short(p.Cold.Text), short(p.Warm.Text))
}

// cacheFiller is the text a cache probe's prompt is made of after its nonce: plain words,
// which every tokenizer cuts into few tokens.
const cacheFiller = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty "

// CachePrompt is a cache probe's prompt: the nonce, then the first cut bytes of the filler.
func CachePrompt(nonce string, cut int) string {
	var b strings.Builder
	b.Grow(len(nonce) + 1 + cut)
	b.WriteString(nonce)
	b.WriteByte(' ')
	for b.Len() < len(nonce)+1+cut {
		rest := len(nonce) + 1 + cut - b.Len()
		b.WriteString(cacheFiller[:min(rest, len(cacheFiller))])
	}
	// Not trimmed: a trailing space makes one byte more, so that a tokenizer of bytes
	// reaches every count.
	return b.String()
}

// PromptFit finds the prompt behind a nonce that the engine's tokenizer counts as Target
// tokens: first a search over cuts of the filler, a longer cut mostly counting more tokens;
// when no cut counts exactly Target (a tokenizer of subwords may count a cut that ends
// inside a word as two tokens more than the cut before it), the prompt is cut at the
// last whole word below Target and padded with pieces of punctuation — " ," first, one
// token each for the usual tokenizers, then others, for tokenizers that count " ," as
// several — as many as are missing. The shell counts Prompt(nonce) and tells Observe;
// the fit ends when Done, Found saying whether a prompt of exactly Target tokens was found.
type PromptFit struct {
	Target int
	Cut    int // the cut of the filler to count next; the answer once Found
	Pad    int // the pieces after it (padPieces[piece])
	Done   bool
	Found  bool
	// lo is the longest cut known to count fewer than Target (-1: none, as if the empty
	// filler were one byte) and loCount its count, hi the shortest known to count more
	// (-1: none yet). padding: the search is in its second part.
	lo, hi, loCount int
	padding         bool
	piece           int
	padSeen         map[int]int // the counts of the paddings of this piece
	tries           int
}

// padPieces are the pieces a prompt is padded with, tried in turn.
var padPieces = []string{" ,", ".", "!", " a", "-", "0"}

// Prompt is the prompt to count next, and the answer once Found.
func (f *PromptFit) Prompt(nonce string) string {
	p := CachePrompt(nonce, f.Cut)
	if f.Pad == 0 {
		return p
	}
	return strings.TrimRight(p, " ") + strings.Repeat(padPieces[f.piece], f.Pad)
}

// maxFitTries bounds the counting calls of one fit, padTries those of its second part.
const (
	maxFitTries = 40
	padTries    = 8
)

// NewPromptFit starts a fit at a first guess of four bytes a token.
func NewPromptFit(target int) *PromptFit {
	return &PromptFit{Target: target, Cut: 4 * target, lo: -1, hi: -1}
}

// Observe takes the count of the prompt of f.Cut and sets the next cut to count.
func (f *PromptFit) Observe(count int) {
	if f.Done {
		return
	}
	f.tries++
	if count == f.Target {
		f.Done, f.Found = true, true
		return
	}
	if f.padding {
		f.observePadded(count)
		return
	}
	if count < f.Target {
		f.lo, f.loCount = f.Cut, count
	} else {
		f.hi = f.Cut
	}
	switch {
	case f.hi < 0 && f.tries < maxFitTries:
		f.Cut = 2*f.Cut + 1 // still too short: grow
	case f.hi-f.lo <= 1 || f.tries >= maxFitTries:
		f.startPadding() // no cut counts exactly Target
	default:
		f.Cut = (f.lo + f.hi) / 2
	}
}

// startPadding goes on from the longest cut below Target, shortened to its last whole
// word, with as many pieces as tokens are missing there.
func (f *PromptFit) startPadding() {
	if f.lo <= 0 {
		f.Done = true
		return
	}
	words := CachePrompt("", f.lo)
	cut := strings.LastIndexByte(words[:len(words)-1], ' ')
	if cut <= 0 {
		f.Done = true
		return
	}
	f.padding, f.tries = true, 0
	f.Cut, f.Pad = cut, max(1, f.Target-f.loCount)
}

// observePadded moves the padding by what the count missed Target by, counting what one
// piece adds once two paddings are known; when the piece cannot make Target, the next.
func (f *PromptFit) observePadded(count int) {
	if f.padSeen == nil {
		f.padSeen = map[int]int{}
	}
	f.padSeen[f.Pad] = count
	next := -1
	switch below, above := f.bracket(); {
	case f.tries >= padTries:
	case below >= 0 && above >= 0 && above-below <= 1:
		// Adjacent paddings straddle Target: this piece cannot make it.
	case count < f.Target:
		next = f.Pad + max(1, (f.Target-count)/f.perPiece())
	case f.Pad > 1:
		next = max(1, f.Pad-max(1, (count-f.Target)/f.perPiece()))
	}
	if _, seen := f.padSeen[next]; next > 0 && !seen {
		f.Pad = next
		return
	}
	if b, a := f.bracket(); next > 0 && b >= 0 && a >= 0 && a-b > 1 {
		f.Pad = (a + b) / 2
		return
	}
	if f.piece+1 < len(padPieces) {
		f.piece, f.Pad, f.tries, f.padSeen = f.piece+1, 1, 0, nil
		return
	}
	f.Done = true
}

// bracket is the largest padding seen to count below Target and the smallest to count
// above it (-1: none).
func (f *PromptFit) bracket() (below, above int) {
	below, above = -1, -1
	for pad, c := range f.padSeen {
		if c < f.Target && pad > below {
			below = pad
		}
		if c > f.Target && (above < 0 || pad < above) {
			above = pad
		}
	}
	return below, above
}

// perPiece is the tokens one piece adds, as far as the paddings seen tell (1 until two are
// known).
func (f *PromptFit) perPiece() int {
	lo, hi := -1, -1
	for pad := range f.padSeen {
		if lo < 0 || pad < lo {
			lo = pad
		}
		if pad > hi {
			hi = pad
		}
	}
	if hi <= lo {
		return 1
	}
	return max(1, (f.padSeen[hi]-f.padSeen[lo])/(hi-lo))
}
