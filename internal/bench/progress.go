package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// progressEvery is how often the progress line is redrawn: often enough to look alive,
// rarely enough to cost the client nothing.
const progressEvery = 250 * time.Millisecond

// progress draws one line on a terminal while a run goes on. A nil *progress draws
// nothing, which is what a redirected stderr gets: a log or a pipe would only collect
// carriage returns.
type progress struct {
	w io.Writer
}

// newProgress returns a progress line on stderr when stderr is a terminal, else nil.
func newProgress(stderr io.Writer) *progress {
	f, ok := stderr.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return nil
	}
	return &progress{w: stderr}
}

// track redraws the line from r's counters until the returned stop is called, which
// erases it.
func (p *progress) track(label string, r *runner, start time.Time) (stop func()) {
	if p == nil {
		return func() {}
	}
	if label == "" {
		label = "bench"
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(p.w, "\r\033[K")
				return
			case <-t.C:
				el := time.Since(start)
				fmt.Fprintf(p.w, "\r\033[K%s %5.1fs  %d requests, %d failed, %.0f tokens/s",
					label, el.Seconds(), r.finished.Load(), r.failed.Load(), float64(r.tokens.Load())/el.Seconds())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
