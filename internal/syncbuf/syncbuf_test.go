package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers in many goroutines and a reader meanwhile: every write is kept whole (run with
// -race, which also reports any unguarded access).
func TestConcurrentWritesKeptWhole(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 800 || len(b.String()) != 800*len("line\n") {
		t.Fatalf("%d whole lines in %d bytes, want 800 in %d", n, len(b.String()), 800*len("line\n"))
	}
}
