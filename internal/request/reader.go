package request

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/upstream"
)

// Limits on what the gateway reads from an engine.
const (
	maxDrain           = 64 << 10
	maxDrainWait       = 100 * time.Millisecond
	maxEngineErrorBody = 64 << 10
	maxEngineBody      = 64 << 20
)

// errBodyTooLarge: a non-streaming answer above maxEngineBody; the gateway closes it.
var errBodyTooLarge = errors.New("engine answer larger than 64 MiB")

// upKind names what an attempt's reader reports.
type upKind uint8

const (
	upData   upKind = iota + 1 // bytes of the stream, as one Read returned them
	upEnd                      // the stream ended: err nil at EOF, else why
	upFailed                   // the request could not be sent or got no response (err)
	upStatus                   // the engine answered with a non-200 status (status, header, body)
	upBody                     // the complete non-streaming answer (body)
)

// upMsg is one report of an attempt's reader to the request's owner.
type upMsg struct {
	a      *Attempt
	kind   upKind
	buf    *[]byte // upData: a buffer of the read buffers' pool; the owner puts it back
	n      int
	body   []byte
	status int
	header http.Header
	err    error
}

// reader performs one attempt's HTTP exchange in its own goroutine and reports what comes
// back to the owner. It touches nothing of the request but the attempt's channels (stop,
// reads), its context, its completed flag and its cancel function, and the owner's channel
// up. It reads the engine's connection itself (upstream.Client): no other goroutine
// stands between the socket and the owner.
type reader struct {
	a       *Attempt
	up      chan<- upMsg
	client  *upstream.Client
	bufs    *sync.Pool
	stream  bool
	readers *sync.WaitGroup
}

// startReader sends req for attempt a in a new goroutine.
func (rn *Run) startReader(a *Attempt, req *upstream.Request) {
	rn.owner.check()
	rn.atts.readers.Add(1)
	r := reader{a: a, up: rn.atts.up, client: rn.srv.Attempts(), bufs: rn.srv.ReadBuffers(), stream: rn.p.Req.Stream, readers: &rn.atts.readers}
	go r.read(req)
}

// read performs the attempt's HTTP exchange and reports what comes back, one read at a
// time. The owner holds at most readAhead reads of an attempt, so a client that reads
// slowly slows this reader and, through TCP, the engine, instead of making the gateway
// buffer the answer: what arrives meanwhile waits in the socket and comes in one read, so a
// busy stream is forwarded in batches, one flush each. While the owner handles one read the
// reader may make the next, so a stream that comes a token at a time costs two wake-ups per
// token (the reader's by the engine, the owner's by the reader), not three.
//
// The client never sends the request twice (docs/design.md §3): an error of Do is the
// attempt's failure, with how much of the request was written, and the machine decides.
func (r reader) read(req *upstream.Request) {
	defer r.readers.Done()
	a := r.a
	resp, err := r.client.Do(a.ctx, req)
	if err != nil {
		r.report(upMsg{kind: upFailed, err: err})
		return
	}
	defer r.closeBody(resp)
	switch {
	case resp.Status != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp, maxEngineErrorBody))
		r.report(upMsg{kind: upStatus, status: resp.Status, header: resp.Header.HTTP(), body: body})
	case !r.stream:
		body, err := io.ReadAll(io.LimitReader(resp, maxEngineBody+1))
		if err == nil && len(body) > maxEngineBody {
			err = errBodyTooLarge
		}
		if err != nil {
			r.report(upMsg{kind: upEnd, err: err})
			return
		}
		r.report(upMsg{kind: upBody, body: body})
	default:
		for {
			// Room for one more read first: the owner holds at most readAhead of this
			// attempt's reads. Then the engine: a stream that is waiting for its next token
			// waits here, holding no buffer.
			select {
			case a.reads <- struct{}{}:
			case <-a.stop:
				return
			}
			resp.Wait()
			buf := r.bufs.Get().(*[]byte)
			n, err := resp.Read(*buf)
			if n > 0 {
				// The owner returns the buffer to the pool, and the read's room, once it has
				// decoded it and flushed the client.
				if !r.report(upMsg{kind: upData, buf: buf, n: n}) {
					r.bufs.Put(buf)
					return
				}
			} else {
				r.bufs.Put(buf)
				<-a.reads
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				r.report(upMsg{kind: upEnd, err: err})
				return
			}
		}
	}
}

// report hands m to the owner, or drops it once the attempt has ended (the owner no longer
// listens to it). It reports whether the owner got it.
func (r reader) report(m upMsg) bool {
	m.a = r.a
	select {
	case r.up <- m:
		return true
	case <-r.a.stop:
		return false
	}
}

// closeBody ends the attempt's response. A completed answer may not be at its end yet (the
// chunked terminator after [DONE]); reading it, bounded, puts the connection back in the
// pool for the next request instead of dialling a new one. A response not read to its end
// closes its connection, which is how the engine learns the request was abandoned; a
// cancelled attempt's connection was closed already, by its context.
func (r reader) closeBody(resp *upstream.Response) {
	a := r.a
	if a.completed.Load() {
		stop := time.AfterFunc(maxDrainWait, a.cancel)
		io.CopyN(io.Discard, resp, maxDrain)
		stop.Stop()
	}
	resp.Close()
	a.cancel()
}
