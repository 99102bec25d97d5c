package gateway

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The access log's milliseconds are the digits encoding/json's float formatting wrote
// before, for every duration a request can have and at the edges of the fast path.
func TestAppendMillisMatchesFormatFloat(t *testing.T) {
	check := func(us int64) {
		t.Helper()
		want := strconv.FormatFloat(float64(us)/1000, 'f', -1, 64)
		if got := string(appendMillis(nil, us)); got != want {
			t.Fatalf("appendMillis(%d) = %q, want %q", us, got, want)
		}
	}
	for us := int64(-2100); us <= 2100; us++ {
		check(us)
	}
	for _, us := range []int64{1e15 - 1, 1e15, 1e15 + 1, -1e15 + 1, -1e15, 1<<53 - 1, 1 << 62, -1 << 63, 1<<63 - 1, 999_999_999_999_999} {
		check(us)
	}
	r := rand.New(rand.NewPCG(3, 5))
	for range 200_000 {
		check(r.Int64N(1e15))
		check(r.Int64N(60_000_000)) // a minute
	}
}
