package lease

import (
	"testing"
	"time"
)

// The lease header comes from the network (the agent parses what any client sends): every
// input must parse or fail without a panic, an accepted header must be inside the bounds
// ParseHeader promises, and what it accepts must survive FormatHeader unchanged.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{
		"epoch=7;ttl_ms=3000", "ttl_ms=1; epoch=1", "epoch=18446744073709551615;ttl_ms=600000",
		"epoch=0;ttl_ms=1000", "epoch=1;ttl_ms=0", "epoch=1;ttl_ms=600001", "epoch=-1;ttl_ms=5",
		"epoch=1", ";;epoch = 2 ; ttl_ms = 9 ;future=x", "epoch=1;ttl_ms=1e3", "", "=", "epoch=1;ttl_ms=99999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		epoch, ttl, err := ParseHeader(v)
		if err != nil {
			return
		}
		if epoch == 0 || ttl <= 0 || ttl > MaxTTL || ttl%time.Millisecond != 0 {
			t.Fatalf("ParseHeader(%q) accepted epoch %d, ttl %s", v, epoch, ttl)
		}
		e2, ttl2, err := ParseHeader(FormatHeader(epoch, ttl))
		if err != nil || e2 != epoch || ttl2 != ttl {
			t.Fatalf("round trip of %q: %d %s %v, want %d %s", v, e2, ttl2, err, epoch, ttl)
		}
	})
}
