package sse

import (
	"bytes"
	"errors"
)

// MaxEventSize is the largest event a Decoder accepts. It bounds the memory a
// single stream can pin: an engine that never ends an event cannot make the
// gateway buffer without limit.
const MaxEventSize = 4 << 20

// ErrEventTooLarge is reported by Decoder.Err once an event (complete or still
// incomplete) is larger than MaxEventSize.
var ErrEventTooLarge = errors.New("sse: event larger than 4 MiB")

// Decoder splits a server-sent event stream into events incrementally. Feed it
// whatever each Read returned with Append, then call Next until it reports
// false. The zero value is ready to use.
//
// Append does not copy when no event is pending: the events are decoded where
// they lie, and only the start of an incomplete event is copied, when Next runs
// out. The slice given to Append must therefore stay unchanged until Next has
// reported false (a reader may then reuse it for its next Read).
//
// Lines may end in LF, CRLF or CR, also mixed, and a CRLF may be split across
// two Appends. One case cannot be decided without waiting: an event whose
// terminating blank line is a CR that is the last byte appended so far. The
// event is returned at once rather than held until the next Read (a CR-only
// engine would otherwise see every event delayed by one), and an LF that
// arrives first in the next Append is dropped: it would only complete a CRLF
// that every SSE parser already treats as one line end. Only then does Raw
// differ from the bytes received, by that one LF.
type Decoder struct {
	// Protocol says how each event's data is summarized (the zero value: Completions).
	Protocol Protocol
	// FramesOnly skips what the events carry: Next returns each event's Raw, Name and Data,
	// with Class, Outputs and the Summary's fields as for an event without data (Class may
	// still be Comment), without scanning the data. For a relay that forwards events as they came and
	// leaves reading them to whoever it forwards them to (the agent, docs/design.md §4).
	FramesOnly bool

	// buf holds the bytes being decoded; buf[start:] is not yet returned by Next. It is
	// either the slice given to the last Append (borrowed: nothing was pending, so the
	// read is decoded where it lies, without a copy) or own.
	buf      []byte
	own      []byte // the decoder's storage for an incomplete event and what follows it
	borrowed bool   // buf is the caller's
	start    int    // first byte of the event being assembled
	pos      int    // next byte to scan for a line end; start <= pos <= len(buf)

	// atLineStart is true when pos is the first byte of a line, so a line end
	// found there is a blank line and ends the event.
	atLineStart bool
	// crPending is true when the byte before pos is a CR that ended a line and
	// the byte at pos, if it is an LF, belongs to that CR.
	crPending bool
	// dropLF is true when the last event ended with a CR at the end of the
	// buffer: an LF at the start of the next event is dropped (see Decoder).
	dropLF bool

	memo    streamMemo // what the stream's chunks repeat (Completions only)
	scratch []byte     // joined multi-line data; reset on Append
	limit   int        // 0 means MaxEventSize; tests lower it
	err     error
}

// Append copies p into the decoder. Events returned by Next before this call
// become invalid, because their bytes may be moved. After Err reports an error,
// Append drops its input.
func (d *Decoder) Append(p []byte) {
	if d.err != nil {
		return
	}
	d.scratch = d.scratch[:0]
	if d.start == len(d.buf) {
		// Nothing is pending: decode p in place. Next copies what is left of an
		// incomplete event into own storage before it reports that it needs more.
		d.buf, d.borrowed = p, true
		d.start, d.pos = 0, 0
		d.atLineStart = true
		return
	}
	d.keepTail() // only when the caller did not run Next until it reported false
	if d.start > 0 {
		// Move the incomplete tail to the front so the buffer stops growing
		// once it fits the largest read plus the largest partial event.
		n := copy(d.buf, d.buf[d.start:])
		d.buf = d.buf[:n]
		d.pos -= d.start
		d.start = 0
	}
	d.buf = append(d.buf, p...)
	d.own = d.buf
}

// keepTail moves the incomplete event at the end of a borrowed buffer into the decoder's
// own storage, so that the caller may reuse the slice it appended.
func (d *Decoder) keepTail() {
	if !d.borrowed {
		return
	}
	d.borrowed = false
	d.own = append(d.own[:0], d.buf[d.start:]...)
	d.pos -= d.start
	d.start = 0
	d.buf = d.own
}

// Next returns the next complete event, or false when more bytes are needed
// (or Err is set). Events made only of blank lines are skipped.
func (d *Decoder) Next() (ev Event, ok bool) {
	for d.err == nil {
		if d.nextDataLine(&ev) {
			return ev, true
		}
		end, ok := d.scanEventEnd()
		if !ok {
			if len(d.buf)-d.start > d.maxSize() {
				d.fail()
			}
			d.keepTail()
			return Event{}, false
		}
		if end-d.start > d.maxSize() {
			d.fail()
			return Event{}, false
		}
		raw := d.buf[d.start:end]
		d.start = end
		if e, ok := d.parseEvent(raw); ok {
			return e, true
		}
	}
	return Event{}, false
}

// nextDataLine sets *ev to the next event and reports true when it is the usual one, a
// single "data:" line ended by LF and a blank line, found with one search for its end
// instead of the general line scan's several. Anything else is left to it. (A pointer,
// not a result: an Event is fifteen words, copied once fewer per event.)
func (d *Decoder) nextDataLine(ev *Event) bool {
	if d.pos != d.start || d.crPending || d.dropLF {
		return false
	}
	rest := d.buf[d.start:]
	if len(rest) < 7 || string(rest[:5]) != "data:" {
		return false
	}
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 || nl+1 >= len(rest) || rest[nl+1] != '\n' || nl+2 > d.maxSize() {
		return false
	}
	value := rest[5:nl]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	// A CR ends a line too: a line with one is left to the general scan, which splits it.
	// The scan of a chunk's JSON looks at every byte, so where it finds the JSON valid it
	// has also seen whether a CR was among them, and the search for one is needed only
	// where it did not (see summarizeLine).
	if d.FramesOnly || d.Protocol != Completions {
		if bytes.IndexByte(value, '\r') >= 0 {
			return false
		}
		*ev = Event{Data: value, CompletionTokens: -1, Choice: -1, Sequence: -1}
		d.summarize(ev, value)
	} else {
		var sum Summary
		if !d.memo.summarizeLine(&sum, value) && bytes.IndexByte(value, '\r') >= 0 {
			// Not one line: what the memo learned from it is no line's data.
			d.memo.forget()
			return false
		}
		*ev = Event{Data: value}
		ev.setSummary(&sum)
	}
	end := d.start + nl + 2
	ev.Raw = d.buf[d.start:end]
	d.start, d.pos, d.atLineStart = end, end, true
	return true
}

// summarize fills ev's summary of its data, unless the decoder only frames events.
func (d *Decoder) summarize(ev *Event, data []byte) {
	switch {
	case d.FramesOnly:
	case d.Protocol == Completions:
		var sum Summary
		d.memo.summarize(&sum, data)
		ev.setSummary(&sum)
	default:
		sum := SummarizeEvent(d.Protocol, ev.Name, data)
		ev.setSummary(&sum)
	}
}

// Buffered returns the number of bytes held that Next has not returned yet:
// after Next reports false, the bytes of an incomplete event.
func (d *Decoder) Buffered() int { return len(d.buf) - d.start }

// Err returns ErrEventTooLarge once an event exceeded MaxEventSize; the stream
// cannot be resynchronised after that, so the decoder stays failed until Reset.
func (d *Decoder) Err() error { return d.err }

// Reset drops all buffered bytes and any error, keeping the allocated buffers.
func (d *Decoder) Reset() {
	*d = Decoder{Protocol: d.Protocol, FramesOnly: d.FramesOnly, buf: d.own[:0], own: d.own[:0], scratch: d.scratch[:0], limit: d.limit, atLineStart: true,
		memo: d.memo}
	d.memo.forget()
}

func (d *Decoder) maxSize() int {
	if d.limit > 0 {
		return d.limit
	}
	return MaxEventSize
}

func (d *Decoder) fail() {
	d.err = ErrEventTooLarge
	d.buf, d.borrowed = d.own[:0], false
	d.start, d.pos = 0, 0
}

// scanEventEnd advances the line scanner and returns the offset just past the
// blank line that ends the current event. Scanning resumes where the previous
// call stopped, so a large event arriving in many small reads is scanned once.
func (d *Decoder) scanEventEnd() (int, bool) {
	buf := d.buf
	pos := d.pos
	if pos == d.start {
		// A fresh event: pos == start only happens at an event's first byte.
		d.atLineStart = true
	}
	for pos < len(buf) {
		if d.crPending {
			d.crPending = false
			if buf[pos] == '\n' {
				pos++
				continue
			}
		}
		if d.dropLF {
			d.dropLF = false
			if pos == d.start && buf[pos] == '\n' {
				pos++
				d.start = pos
				continue
			}
		}
		if d.atLineStart {
			switch buf[pos] {
			case '\n':
				d.pos = pos + 1
				return pos + 1, true
			case '\r':
				if pos+1 == len(buf) {
					d.pos = pos + 1
					d.dropLF = true
					return pos + 1, true
				}
				if buf[pos+1] == '\n' {
					pos++
				}
				d.pos = pos + 1
				return pos + 1, true
			}
		}
		i := indexLineEnd(buf[pos:])
		if i < 0 {
			d.atLineStart = false
			pos = len(buf)
			break
		}
		pos += i
		if buf[pos] == '\r' {
			d.crPending = true
		}
		pos++
		d.atLineStart = true
	}
	d.pos = pos
	return 0, false
}

// indexLineEnd returns the index of the first CR or LF in b, or -1.
func indexLineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// parseEvent reads the fields of one complete event. It reports false for an
// event with no lines at all (a stray blank line), which is not forwarded.
// An event with no data field but an "error" field (older llama.cpp servers)
// gets that field's value as Data and is classed Error.
func (d *Decoder) parseEvent(raw []byte) (Event, bool) {
	ev := Event{Raw: raw, CompletionTokens: -1, Choice: -1, Sequence: -1}
	rest := raw
	dataLines := 0
	comments := 0
	fields := 0
	var errorValue []byte
	for len(rest) > 0 {
		i := indexLineEnd(rest)
		line := rest[:i] // every line in a complete event has an end
		next := i + 1
		if rest[i] == '\r' && next < len(rest) && rest[next] == '\n' {
			next++
		}
		rest = rest[next:]
		if len(line) == 0 {
			break // the blank line that ends the event
		}
		if line[0] == ':' {
			comments++
			continue
		}
		fields++
		name, value := line, line[len(line):]
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "data":
			dataLines++
			switch dataLines {
			case 1:
				ev.Data = value
			case 2:
				// Join into scratch space; the buffer itself is never edited,
				// so Raw stays exactly what the engine sent.
				start := len(d.scratch)
				d.scratch = append(d.scratch, ev.Data...)
				d.scratch = append(d.scratch, '\n')
				d.scratch = append(d.scratch, value...)
				ev.Data = d.scratch[start:len(d.scratch):len(d.scratch)]
			default:
				start := len(d.scratch) - len(ev.Data)
				d.scratch = append(d.scratch, '\n')
				d.scratch = append(d.scratch, value...)
				ev.Data = d.scratch[start:len(d.scratch):len(d.scratch)]
			}
		case "event":
			ev.Name = value
		case "error":
			// Older llama.cpp servers report a failure mid-stream as an
			// "error:" field instead of a data line.
			errorValue = value
		}
		// id, retry and unknown fields carry nothing the gateway acts on.
	}
	switch {
	case ev.Data != nil:
		d.summarize(&ev, ev.Data)
	case errorValue != nil:
		ev.Data = errorValue
		if !d.FramesOnly {
			sum := Summarize(errorValue)
			ev.setSummary(&sum)
			ev.Class |= Error
			ev.Outputs = 0 // a failure delivers nothing, whatever its body holds
		}
	case fields == 0 && comments > 0:
		ev.Class = Comment
	case fields == 0:
		return Event{}, false
	}
	return ev, true
}
