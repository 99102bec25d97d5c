package logging

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Buffer collects log lines and writes them out in batches: when it holds Size bytes, when
// the oldest line has waited Every, and at once after a line at WARN or above (through
// NewBuffered's handler). A gateway writes one access-log line per request; written one by
// one, each line costs a system call, as much CPU as a streamed answer's own share of the
// event scan (docs/performance.md, "The access log"). Lines wait at most Every, and Flush
// writes what is left when the process ends; a crash loses at most that much.
type Buffer struct {
	w     io.Writer
	size  int
	every time.Duration

	mu    sync.Mutex
	buf   []byte
	armed bool // a flush is scheduled for the lines waiting
}

// Defaults of a Buffer: about a hundred access-log lines, a tenth of a second.
const (
	DefaultBufferSize  = 32 << 10
	DefaultBufferEvery = 100 * time.Millisecond
)

// NewBuffer returns a Buffer writing to w.
func NewBuffer(w io.Writer, size int, every time.Duration) *Buffer {
	return &Buffer{w: w, size: size, every: every, buf: make([]byte, 0, size)}
}

// Write keeps p for a later write, or writes what is kept (and p) when that fills the
// buffer. Its error is the underlying writer's, when it wrote.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) <= b.size {
		b.buf = append(b.buf, p...)
		if !b.armed {
			b.armed = true
			time.AfterFunc(b.every, b.flushScheduled)
		}
		return len(p), nil
	}
	if err := b.writeOutLocked(); err != nil {
		return 0, err
	}
	if len(p) > b.size {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// Flush writes the lines kept.
func (b *Buffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writeOutLocked()
}

func (b *Buffer) flushScheduled() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	_ = b.writeOutLocked() // nothing to report it to: the next write meets the same error
}

func (b *Buffer) writeOutLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// NewBuffered returns a logger writing format to w through a Buffer, and the function that
// writes what the buffer holds (to call before the process exits). Lines at WARN and
// above are written at once, with everything before them.
func NewBuffered(format string, w io.Writer) (*slog.Logger, func() error, error) {
	b := NewBuffer(w, DefaultBufferSize, DefaultBufferEvery)
	l, err := New(format, b)
	if err != nil {
		return nil, nil, err
	}
	return slog.New(flushingHandler{Handler: l.Handler(), b: b, bareJSON: format == JSON || format == ""}), b.Flush, nil
}

// flushingHandler writes a record at WARN or above, and the lines before it, at once:
// what an operator watches for must not wait behind the batch.
type flushingHandler struct {
	slog.Handler
	b *Buffer
	// bareJSON: Handler is the JSON handler itself, with no attributes or groups added,
	// whose lines WriteJSONLine writes as it would.
	bareJSON bool
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if ferr := h.flushAt(r.Level); err == nil {
		err = ferr
	}
	return err
}

// flushAt writes the buffered lines out when a line of level was just added and is one an
// operator watches for (WARN or above).
func (h flushingHandler) flushAt(level slog.Level) error {
	if level < slog.LevelWarn {
		return nil
	}
	return h.b.Flush()
}

func (h flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithAttrs(attrs), b: h.b}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithGroup(name), b: h.b}
}
