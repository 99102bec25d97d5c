package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"
)

const (
	// readSize is the largest chunk read from one side at a time.
	readSize = 32 << 10
	// queueDepth bounds the chunks read but not yet forwarded in one direction, so a slow
	// receiver still pushes back on the sender (beyond a few hundred KiB) as TCP would.
	queueDepth = 16
)

// chunk is what a pipe's reader hands its writer: data, or how the source's stream ended.
type chunk struct {
	data   []byte
	readAt time.Time
	eof    bool  // the source closed its sending side (FIN)
	err    error // the source's read failed otherwise (typically a reset)
}

// pipe forwards one direction of a link: a reader goroutine drains src into queue as fast
// as src sends, and a writer goroutine applies the faults to each chunk in order before
// writing it to dst. Splitting the two keeps the sender's writes succeeding during a
// black hole and lets latency delay chunks without delaying the reading of later ones.
type pipe struct {
	link     *link
	dir      Direction
	src, dst *net.TCPConn
	queue    chan chunk
	pending  atomic.Int64 // bytes read from src and neither forwarded nor dropped yet
}

func newPipe(l *link, dir Direction, src, dst *net.TCPConn) *pipe {
	return &pipe{link: l, dir: dir, src: src, dst: dst, queue: make(chan chunk, queueDepth)}
}

// read moves everything src sends into the queue, ending with a chunk that says how the
// stream ended.
func (pp *pipe) read() {
	defer pp.link.p.wg.Done()
	buf := make([]byte, readSize)
	for {
		n, err := pp.src.Read(buf)
		if n > 0 {
			pp.pending.Add(int64(n))
			pp.link.p.wakeStats()
			if !pp.enqueue(chunk{data: bytes.Clone(buf[:n]), readAt: time.Now()}) {
				return
			}
		}
		if err != nil {
			end := chunk{readAt: time.Now(), eof: errors.Is(err, io.EOF)}
			if !end.eof {
				end.err = err
			}
			pp.enqueue(end)
			return
		}
	}
}

// enqueue hands c to the writer; it reports false if the link ended first.
func (pp *pipe) enqueue(c chunk) bool {
	select {
	case pp.queue <- c:
		return true
	case <-pp.link.done:
		return false
	}
}

// write forwards the queued chunks in order until the stream ends or the link does.
func (pp *pipe) write() {
	defer pp.link.p.wg.Done()
	for {
		select {
		case c := <-pp.queue:
			if !pp.deliver(c) {
				return
			}
		case <-pp.link.done:
			return
		}
	}
}

// deliver applies the current faults to c and passes it on. It reports whether the pipe
// goes on. A fault change wakes it, so each decision is taken against the faults in force
// when the chunk is due.
func (pp *pipe) deliver(c chunk) bool {
	held := false
	defer func() {
		if held {
			pp.link.p.count(func(s *Stats) { s.ClosesHeld-- })
		}
	}()
	for {
		f := pp.link.p.view(pp.dir)
		if wait := time.Until(c.readAt.Add(f.latency)); wait > 0 {
			if !pp.await(f.changed, wait) {
				return false
			}
			continue
		}
		if f.blackHoled {
			if c.data != nil {
				pp.settle(len(c.data), true)
				return true
			}
			// An end of stream is held, not dropped, until the black hole is healed.
			if !held {
				held = true
				pp.link.p.count(func(s *Stats) { s.ClosesHeld++ })
			}
			if !pp.await(f.changed, 0) {
				return false
			}
			continue
		}
		return pp.forward(c)
	}
}

// await waits until changed is closed, the wait (if positive) has passed, or the link
// ends; it reports false in the last case.
func (pp *pipe) await(changed <-chan struct{}, wait time.Duration) bool {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-changed:
		return true
	case <-timeout:
		return true
	case <-pp.link.done:
		return false
	}
}

// forward writes c to dst. An end of stream is passed on as a half-close; a failed read or
// write on either side resets both, as the failure of one hop of a real path would.
func (pp *pipe) forward(c chunk) bool {
	switch {
	case c.data != nil:
		if _, err := pp.dst.Write(c.data); err != nil {
			pp.resetByPeer()
			return false
		}
		pp.settle(len(c.data), false)
		return true
	case c.eof:
		_ = pp.dst.CloseWrite()
		pp.link.finishDirection()
		return false
	default:
		pp.resetByPeer()
		return false
	}
}

// resetByPeer ends the link with a reset and counts it, unless the link had already ended
// (in which case the failure was the proxy's own closing of the connections).
func (pp *pipe) resetByPeer() {
	if pp.link.end(true) {
		pp.link.p.count(func(s *Stats) { s.ResetByPeer++ })
	}
}

// settle records n pending bytes as forwarded or dropped. The pending count falls under
// the proxy's lock, so a Stats snapshot never sees the bytes both pending and settled.
func (pp *pipe) settle(n int, dropped bool) {
	pp.link.p.count(func(s *Stats) {
		pp.pending.Add(-int64(n))
		s.add(pp.dir, n, dropped)
	})
}
