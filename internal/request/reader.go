package request

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
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
	buf    *[]byte // upData: the reader's buffer; the owner hands it back (Attempt.bufBack)
	n      int
	body   []byte
	status int
	header http.Header
	err    error
}

// reader performs one attempt's HTTP call in its own goroutine and reports what comes back
// to the owner. It touches nothing of the request but the attempt's channels (stop,
// bufBack), its completed flag and its cancel function, and the owner's channel up.
type reader struct {
	a       *Attempt
	up      chan<- upMsg
	client  *http.Client
	bufs    *sync.Pool
	stream  bool
	readers *sync.WaitGroup
}

// startReader sends req for attempt a in a new goroutine.
func (rn *Run) startReader(a *Attempt, req *http.Request) {
	rn.owner.check()
	rn.atts.readers.Add(1)
	r := reader{a: a, up: rn.atts.up, client: rn.srv.Engines(), bufs: rn.srv.ReadBuffers(), stream: rn.p.Req.Stream, readers: &rn.atts.readers}
	go r.read(req)
}

// read performs the attempt's HTTP call and reports what comes back, one read at a time.
// The channel to the owner is small, so a client that reads slowly slows this reader and,
// through TCP, the engine, instead of making the gateway buffer the answer.
func (r reader) read(req *http.Request) {
	defer r.readers.Done()
	a := r.a
	resp, err := r.client.Do(req)
	if err != nil {
		r.report(upMsg{kind: upFailed, err: err})
		return
	}
	defer r.closeBody(resp.Body)
	switch {
	case resp.StatusCode != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxEngineErrorBody))
		r.report(upMsg{kind: upStatus, status: resp.StatusCode, header: resp.Header, body: body})
	case !r.stream:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxEngineBody+1))
		if err == nil && len(body) > maxEngineBody {
			err = errBodyTooLarge
		}
		if err != nil {
			r.report(upMsg{kind: upEnd, err: err})
			return
		}
		r.report(upMsg{kind: upBody, body: body})
	default:
		buf := r.bufs.Get().(*[]byte)
		defer r.bufs.Put(buf)
		for {
			n, err := resp.Body.Read(*buf)
			if n > 0 {
				// The owner hands the buffer back once it has decoded it and flushed the
				// client, and only then is the next read made: what arrives meanwhile
				// waits in the socket and comes in one read, so a busy stream is forwarded
				// in batches, one flush each, instead of one flush per event.
				if !r.report(upMsg{kind: upData, buf: buf, n: n}) {
					return
				}
				select {
				case <-a.bufBack:
				case <-a.stop:
					return
				}
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

// closeBody ends the attempt's response. A completed answer may not be at EOF yet (the
// chunked terminator after [DONE]); reading it, bounded, lets the transport reuse the
// connection for the next request instead of dialling a new one. A cancelled attempt's
// connection is closed, which is how the engine learns the request was abandoned.
func (r reader) closeBody(body io.ReadCloser) {
	a := r.a
	if a.completed.Load() {
		stop := time.AfterFunc(maxDrainWait, a.cancel)
		io.CopyN(io.Discard, body, maxDrain)
		stop.Stop()
	}
	body.Close()
	a.cancel()
}
