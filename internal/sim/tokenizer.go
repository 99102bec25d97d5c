package sim

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The sim's tokenizer, documented because prompt_tokens, /tokenize, the
// prefix cache and max_model_len checks all depend on it:
//
//   - a special marker "<|...|>" (no spaces inside) is one token;
//   - a run of letters and digits is one token;
//   - any other character that is not white space is one token;
//   - white space separates tokens and is not a token itself.
//
// So "Hello, world!" is 4 tokens and a rendered chat message costs its
// content plus 3 template tokens (<|im_start|>, the role, <|im_end|>).

// Ids of the chat template's markers; other pieces hash above firstWordID.
const (
	imStartID   = 1
	imEndID     = 2
	firstWordID = 100
	wordIDSpace = 50000
)

// tokenIDs returns the prompt token ids of text.
func tokenIDs(text string) []uint32 {
	ids := make([]uint32, 0, len(text)/4+1)
	forEachPiece(text, func(piece string) {
		ids = append(ids, pieceID(piece))
	})
	return ids
}

// forEachPiece calls fn with every token of text in order.
func forEachPiece(text string, fn func(piece string)) {
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
		case strings.HasPrefix(text[i:], "<|"):
			if end := specialEnd(text[i:]); end > 0 {
				fn(text[i : i+end])
				i += end
				continue
			}
			fn(text[i : i+size])
			i += size
		case isWordRune(r):
			j := i + size
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if !isWordRune(r2) {
					break
				}
				j += s2
			}
			fn(text[i:j])
			i = j
		default:
			fn(text[i : i+size])
			i += size
		}
	}
}

// specialEnd returns the length of the "<|...|>" marker at the start of s,
// or 0 when s does not start with one.
func specialEnd(s string) int {
	for j := 2; j+1 < len(s); j++ {
		if s[j] == ' ' || s[j] == '\n' || s[j] == '\t' {
			return 0
		}
		if s[j] == '|' && s[j+1] == '>' {
			return j + 2
		}
	}
	return 0
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// pieceID maps one token to its id: fixed for the template markers, a hash
// for everything else (collisions are harmless: ids only feed the prefix
// cache and /tokenize).
func pieceID(piece string) uint32 {
	switch piece {
	case "<|im_start|>":
		return imStartID
	case "<|im_end|>":
		return imEndID
	}
	return firstWordID + uint32(fnvString(fnvOffset, piece)%wordIDSpace)
}
