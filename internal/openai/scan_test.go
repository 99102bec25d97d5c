package openai

import (
	"testing"
	"unicode/utf8"
)

// utf8Seq accepts exactly the sequences utf8.DecodeRune decodes (the judgement of
// utf8.Valid), whatever follows them.
func TestUTF8SeqMatchesDecodeRune(t *testing.T) {
	tails := []byte{0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xe0, 0xed, 0xf0, 0xf4, 0xf5, 0xff}
	for lead := 0x80; lead <= 0xff; lead++ {
		for c1 := 0; c1 <= 0xff; c1++ {
			for _, c2 := range tails {
				for _, c3 := range tails {
					for n := 1; n <= 4; n++ {
						seq := []byte{byte(lead), byte(c1), c2, c3}[:n]
						want := 0
						if r, size := utf8.DecodeRune(seq); r != utf8.RuneError || size > 1 {
							want = size
						}
						if got := utf8Seq(seq, 0); got != want {
							t.Fatalf("% x: %d, want %d", seq, got, want)
						}
					}
				}
			}
		}
	}
}
