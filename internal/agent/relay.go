package agent

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/upstream"
)

// relayBufSize is the size the batch written downstream per read starts with: what one
// read of the engine connection's buffer (4 KiB) brings, and an event begun before it.
const relayBufSize = 8 << 10

var relayBufs = sync.Pool{New: func() any {
	b := make([]byte, relayBufSize)
	return &b
}}

// isEventStream reports whether a response is server-sent events.
func isEventStream(h http.Header) bool { return isEventStreamType(h.Get("Content-Type")) }

// isEventStreamType reports whether a Content-Type is server-sent events. The two forms
// engines send (vLLM's and SGLang's servers add "; charset=utf-8") are known at once;
// anything else is parsed, which costs allocations on every stream.
func isEventStreamType(contentType string) bool {
	switch contentType {
	case "text/event-stream", "text/event-stream; charset=utf-8":
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// relayEvents forwards a stream event by event, each exactly as the engine
// wrote it. The events that one read from the engine made available are written
// and flushed together, after a check of the lease: no event is written once it
// has lapsed.
func (a *Agent) relayEvents(w http.ResponseWriter, at *attempt, resp *upstream.Response) (reason string, broken bool) {
	if !a.mayPublish(at) {
		return EndLeaseExpired, true
	}
	copyEngineHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.Status)
	// The head goes out at once unless events came with it: then it leaves with them, in
	// the first batch's write, microseconds later.
	if !resp.Buffered() {
		if err := at.rc.Flush(); err != nil {
			return EndClientGone, true
		}
	}
	outp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(outp)
	out := (*outp)[:0]
	// The agent forwards events as the engine wrote them and checks the lease between
	// them; reading what they carry is the gateway's (docs/design.md §4). Each read is
	// decoded in the engine connection's own buffer (upstream.Response.Next) and copied
	// into the batch before the next read.
	dec := sse.Decoder{FramesOnly: true}
	for {
		read, rerr := resp.Next()
		if len(read) > 0 {
			dec.Append(read)
			out = out[:0]
			events := 0
			for {
				ev, ok := dec.Next()
				if !ok {
					break
				}
				out = append(out, ev.Raw...)
				events++
			}
			if len(out) > 0 {
				// The lease is checked once for the events one read brought, just before
				// they are written together: none of them goes out once it has lapsed.
				if !a.mayPublish(at) {
					return EndLeaseExpired, true
				}
				// The engine's last batch is not flushed here: the handler returns at once
				// (the next Next finds the body's end without reading), and net/http writes
				// it with the response's end in one write.
				last := dec.Err() == nil && dec.Buffered() == 0 && resp.Ended()
				if err := writeBatch(w, at, out, events, !last); err != nil {
					return EndClientGone, true
				}
			}
			switch {
			case dec.Err() != nil:
				return EndEngineError, true // an event too large to hold: the stream cannot continue
			}
		}
		switch {
		case rerr == io.EOF && dec.Buffered() == 0:
			return EndFinished, false
		case rerr == io.EOF:
			return EndEngineError, true // the engine stopped in the middle of an event
		case rerr != nil && at.ctx.Err() != nil:
			return EndClientGone, true // or aborted: reasonFor tells from the cause
		case rerr != nil:
			return EndEngineError, true
		}
	}
}

// writeBatch writes events downstream and, with flush, flushes them.
func writeBatch(w http.ResponseWriter, at *attempt, batch []byte, events int, flush bool) error {
	if _, err := w.Write(batch); err != nil {
		return err
	}
	if flush {
		if err := at.rc.Flush(); err != nil {
			return err
		}
	}
	at.events.Add(int64(events))
	at.bytes.Add(int64(len(batch)))
	return nil
}

// relayWhole forwards a response that is not a stream (a non-stream answer,
// or any error status): it is read in full, then the lease is checked, then it
// is written. An answer whose lease ran out while the engine computed it is
// never delivered.
func (a *Agent) relayWhole(w http.ResponseWriter, at *attempt, resp *upstream.Response) (reason string, broken bool) {
	body, err := upstream.ReadAll(io.LimitReader(resp, maxWholeResponse+1), resp.ContentLength, maxWholeResponse)
	if err != nil {
		if at.ctx.Err() != nil {
			return EndClientGone, true
		}
		return EndEngineError, true
	}
	if !a.mayPublish(at) {
		return EndLeaseExpired, true
	}
	if len(body) > maxWholeResponse {
		writeError(w, http.StatusBadGateway, "engine_response_too_large",
			"the engine's response is larger than "+strconv.Itoa(maxWholeResponse)+" bytes")
		return EndEngineError, false
	}
	copyEngineHeaders(w.Header(), resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.Status)
	if _, err := w.Write(body); err != nil {
		return EndClientGone, true
	}
	at.events.Add(1)
	at.bytes.Add(int64(len(body)))
	return EndFinished, false
}
