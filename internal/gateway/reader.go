package gateway

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/upstream"
)

// Limits on what the gateway reads from an engine.
const (
	maxDrain           = 64 << 10
	maxDrainWait       = 100 * time.Millisecond
	maxEngineErrorBody = 64 << 10
	maxEngineBody      = 64 << 20
	readChunk          = upstream.ReadBufferSize // a body Read returns no more
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
	a      *attempt
	kind   upKind
	buf    *[]byte // upData: the reader's buffer; the owner hands it back (attempt.bufBack)
	n      int
	body   []byte
	status int
	header http.Header
	err    error
}

// read performs attempt a's HTTP call and reports what comes back to the owner, one read
// at a time. The channel to the owner is small, so a client that reads slowly slows this
// reader and, through TCP, the engine, instead of making the gateway buffer the answer.
// It runs in its own goroutine and touches nothing of the request but a's channels.
func (rn *run) read(a *attempt, req *http.Request, stream bool) {
	defer rn.readers.Done()
	resp, err := rn.s.client.Do(req)
	if err != nil {
		rn.report(a, upMsg{kind: upFailed, err: err})
		return
	}
	defer rn.closeBody(a, resp.Body)
	switch {
	case resp.StatusCode != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxEngineErrorBody))
		rn.report(a, upMsg{kind: upStatus, status: resp.StatusCode, header: resp.Header, body: body})
	case !stream:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxEngineBody+1))
		if err == nil && len(body) > maxEngineBody {
			err = errBodyTooLarge
		}
		if err != nil {
			rn.report(a, upMsg{kind: upEnd, err: err})
			return
		}
		rn.report(a, upMsg{kind: upBody, body: body})
	default:
		buf := rn.s.bufs.Get().(*[]byte)
		defer rn.s.bufs.Put(buf)
		for {
			n, err := resp.Body.Read(*buf)
			if n > 0 {
				// The owner hands the buffer back once it has decoded it and flushed the
				// client, and only then is the next read made: what arrives meanwhile
				// waits in the socket and comes in one read, so a busy stream is forwarded
				// in batches, one flush each, instead of one flush per event.
				if !rn.report(a, upMsg{kind: upData, buf: buf, n: n}) {
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
				rn.report(a, upMsg{kind: upEnd, err: err})
				return
			}
		}
	}
}

// report hands m to the owner, or drops it once the attempt has ended (the owner no longer
// listens to it). It reports whether the owner got it.
func (rn *run) report(a *attempt, m upMsg) bool {
	m.a = a
	select {
	case rn.up <- m:
		return true
	case <-a.stop:
		return false
	}
}

// closeBody ends the response of attempt a. A completed answer may not be at EOF yet (the
// chunked terminator after [DONE]); reading it, bounded, lets the transport reuse the
// connection for the next request instead of dialling a new one. A cancelled attempt's
// connection is closed, which is how the engine learns the request was abandoned.
func (rn *run) closeBody(a *attempt, body io.ReadCloser) {
	if a.completed.Load() {
		stop := time.AfterFunc(maxDrainWait, a.cancel)
		io.CopyN(io.Discard, body, maxDrain)
		stop.Stop()
	}
	body.Close()
	a.cancel()
}
