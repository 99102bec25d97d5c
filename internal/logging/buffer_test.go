package logging

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// writes records each Write it is given, as the file behind a log would see them.
type writes struct {
	mu  sync.Mutex
	all []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, string(p))
	return len(p), nil
}

func (w *writes) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.all...)
}

func TestBufferWritesBatchesAfterEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		b := NewBuffer(&w, 1<<10, 100*time.Millisecond)
		b.Write([]byte("one\n"))
		time.Sleep(60 * time.Millisecond)
		b.Write([]byte("two\n"))
		synctest.Wait()
		if got := w.get(); len(got) != 0 {
			t.Fatalf("written before the first line waited 100ms: %q", got)
		}
		time.Sleep(40 * time.Millisecond)
		synctest.Wait()
		if got := w.get(); len(got) != 1 || got[0] != "one\ntwo\n" {
			t.Fatalf("after 100ms: %q, want one write of both lines", got)
		}
		// The next line waits its own 100ms, not what is left of the first's.
		b.Write([]byte("three\n"))
		time.Sleep(99 * time.Millisecond)
		synctest.Wait()
		if got := w.get(); len(got) != 1 {
			t.Fatalf("third line written early: %q", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := w.get(); len(got) != 2 || got[1] != "three\n" {
			t.Fatalf("third line: %q", got)
		}
	})
}

func TestBufferWritesWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		b := NewBuffer(&w, 10, time.Hour)
		b.Write([]byte("aaaa\n"))
		b.Write([]byte("bbbb\n")) // exactly full: kept
		if got := w.get(); len(got) != 0 {
			t.Fatalf("written before full: %q", got)
		}
		b.Write([]byte("cc\n")) // does not fit: the kept lines go first
		if got := w.get(); len(got) != 1 || got[0] != "aaaa\nbbbb\n" {
			t.Fatalf("on overflow: %q", got)
		}
		long := strings.Repeat("x", 20) + "\n"
		b.Write([]byte(long)) // larger than the buffer: written through, after what was kept
		if got := w.get(); len(got) != 3 || got[1] != "cc\n" || got[2] != long {
			t.Fatalf("a line larger than the buffer: %q", got)
		}
		b.Write([]byte("dd\n"))
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := w.get(); len(got) != 4 || got[3] != "dd\n" {
			t.Fatalf("after Flush: %q", got)
		}
		if err := b.Flush(); err != nil || len(w.get()) != 4 {
			t.Fatal("a Flush with nothing kept must write nothing")
		}
	})
}

func TestNewBufferedWritesWarningsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		l, flush, err := NewBuffered(JSON, &w)
		if err != nil {
			t.Fatal(err)
		}
		l.Info("request", "request_id", "req_1")
		l.With("component", "pool").Info("probe")
		if got := w.get(); len(got) != 0 {
			t.Fatalf("info lines written at once: %q", got)
		}
		l.With("component", "pool").Warn("replica down")
		got := w.get()
		if len(got) != 1 || strings.Count(got[0], "\n") != 3 || !strings.Contains(got[0], `"msg":"replica down"`) {
			t.Fatalf("a warning must be written at once with the lines before it: %q", got)
		}
		l.Info("request", "request_id", "req_2")
		if err := flush(); err != nil {
			t.Fatal(err)
		}
		if got := w.get(); len(got) != 2 || !bytes.Contains([]byte(got[1]), []byte("req_2")) {
			t.Fatalf("flush: %q", got)
		}
	})
}
