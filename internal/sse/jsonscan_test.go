package sse

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSkipPlain checks the eight-bytes-at-a-time search against a plain loop,
// with special bytes at every position and random bytes around them.
func TestSkipPlain(t *testing.T) {
	naive := func(b []byte, i int) int {
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		return i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []byte{'"', '\\', 0x00, 0x1f, '\n'}
	buf := make([]byte, 40)
	for n := 0; n < 20000; n++ {
		for i := range buf {
			// Bias towards bytes next to the special ones, where a bit trick
			// would go wrong: 0x20, '!', '#', '[', ']', 0x7f, 0x80, 0xff.
			switch rng.IntN(4) {
			case 0:
				buf[i] = []byte{0x20, '!', '#', '[', ']', 0x7f, 0x80, 0xff, 0xa2, 0xdc}[rng.IntN(10)]
			default:
				buf[i] = byte(rng.IntN(256))
				if buf[i] < 0x20 || buf[i] == '"' || buf[i] == '\\' {
					buf[i] = 'a'
				}
			}
		}
		if rng.IntN(5) > 0 {
			buf[rng.IntN(len(buf))] = specials[rng.IntN(len(specials))]
		}
		if rng.IntN(3) == 0 {
			buf[rng.IntN(len(buf))] = specials[rng.IntN(len(specials))]
		}
		from := rng.IntN(len(buf))
		if got, want := skipPlain(buf, from), naive(buf, from); got != want {
			t.Fatalf("skipPlain(%q, %d) = %d, want %d", buf, from, got, want)
		}
	}
	// Every single special byte at every position of a word.
	for _, sp := range specials {
		for pos := 0; pos < 8; pos++ {
			w := []byte("abcdefgh")
			w[pos] = sp
			if m := specialBytes(binary.LittleEndian.Uint64(w)); m == 0 {
				t.Fatalf("specialBytes missed %q at %d", sp, pos)
			}
			if got := skipPlain(w, 0); got != pos {
				t.Fatalf("skipPlain(%q) = %d, want %d", w, got, pos)
			}
		}
	}
}
