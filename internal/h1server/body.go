package h1server

import (
	"io"
	"net/http"
)

// requestBody is a request's body as its handler reads it. It answers an Expect:
// 100-continue at the first read, gives the connection's read buffer back once the body
// is read whole (so that a stream that runs long after its request came in holds none),
// and does not read the rest of the body on Close: what the handler left is read after
// it returns, up to a bound (see response.finish).
type requestBody struct {
	c  *conn
	w  *response
	rc io.ReadCloser
	// continueDue: the client waits for "100 Continue" before it sends the body.
	continueDue bool
	done        bool // read to its end
	closed      bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.done {
		return 0, io.EOF
	}
	if b.continueDue {
		b.continueDue = false
		if !b.w.committed && b.w.err == nil {
			if _, err := b.c.wr.Write(continueLine); err != nil {
				b.w.fail(err)
				return 0, err
			}
		}
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.done = true
		b.c.releaseReader()
		b.c.bodyRead()
	}
	return n, err
}

func (b *requestBody) Close() error {
	b.closed = true
	return nil
}

// maxPostHandlerRead is how much of a body its handler left unread is read and dropped
// so that the connection can carry the next request; past it the connection is closed
// (net/http's bound).
const maxPostHandlerRead = 256 << 10

// discardRest reads what the handler left of the body, up to maxPostHandlerRead, and
// reports whether the connection is still in step with the client (the body read whole).
func (b *requestBody) discardRest() bool {
	if b.done {
		return true
	}
	if b.continueDue {
		return false // the client may or may not send the body it was not asked for
	}
	b.closed = false
	_, err := io.CopyN(io.Discard, b, maxPostHandlerRead+1)
	return err == io.EOF && b.done
}

// continueLine is the interim response a client that expects it waits for.
var continueLine = []byte("HTTP/1.1 100 Continue\r\n\r\n")
