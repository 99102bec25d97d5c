package upstream

import (
	"bytes"
	"strconv"
)

// bodyKind is how a response body is delimited (RFC 9112 §6.3).
type bodyKind uint8

const (
	bodyNone       bodyKind = iota // HEAD, 1xx, 204, 304, or Content-Length: 0
	bodyLength                     // Content-Length bytes
	bodyChunked                    // Transfer-Encoding: chunked
	bodyUntilClose                 // neither: the body ends when the engine closes
)

// chunkState is where a chunked body's decoder stands.
type chunkState uint8

const (
	chunkSize    chunkState = iota // expecting a chunk-size line
	chunkData                      // inside a chunk's data
	chunkDataCR                    // expecting the CR after a chunk's data
	chunkDataLF                    // expecting the LF after it
	chunkTrailer                   // expecting a trailer field or the empty line that ends the body
)

// maxChunkLine bounds a chunk-size line (extensions included) and a trailer line. The
// connection's read buffer must hold one, since a line split across reads waits there.
const maxChunkLine = 4 << 10

// bodyDecoder strips a body's framing. It is pure: it is handed bytes as they arrive and
// writes the payload out, so the same code decodes from the connection's buffer and in
// place in the caller's buffer, and its tests and fuzzing need no connection.
type bodyDecoder struct {
	kind bodyKind
	// remain: bodyLength, the bytes left of the body; bodyChunked, of the current chunk.
	remain int64
	state  chunkState
	done   bool
	// trailer counts what the trailer took against the head limits.
	trailerFields, trailerBytes int
	lim                         headLimits
}

// decode consumes framing and payload from in and writes the payload to out. It returns
// how much of each it used. It stops when in is used up, when out is full and the next
// input byte is payload, when the body ends (done), or when a line (chunk size, trailer)
// is not complete in in: then nIn stops at the line's start and the caller must supply
// more bytes after the rest of in. out may be in itself (decoding in place): no payload
// byte is ever written past the input position it came from.
func (d *bodyDecoder) decode(out, in []byte) (nOut, nIn int, err error) {
	switch d.kind {
	case bodyNone:
		d.done = true
		return 0, 0, nil
	case bodyLength:
		n := int(min(d.remain, int64(len(in)), int64(len(out))))
		copy(out, in[:n])
		d.remain -= int64(n)
		d.done = d.remain == 0
		return n, n, nil
	case bodyUntilClose:
		n := copy(out, in)
		return n, n, nil
	}
	for nIn < len(in) && !d.done {
		switch d.state {
		case chunkData:
			n := int(min(d.remain, int64(len(in)-nIn), int64(len(out)-nOut)))
			if n == 0 {
				return nOut, nIn, nil // out is full
			}
			copy(out[nOut:], in[nIn:nIn+n])
			nOut += n
			nIn += n
			d.remain -= int64(n)
			if d.remain == 0 {
				d.state = chunkDataCR
			}
		case chunkDataCR, chunkDataLF:
			want := byte('\r')
			if d.state == chunkDataLF {
				want = '\n'
			}
			if in[nIn] != want {
				return nOut, nIn, &ProtocolError{What: "chunk data not followed by CRLF"}
			}
			nIn++
			d.state++
			if d.state > chunkDataLF {
				d.state = chunkSize
			}
		case chunkSize, chunkTrailer:
			line, n, err := chunkLine(in[nIn:])
			if err != nil || n == 0 {
				return nOut, nIn, err
			}
			nIn += n
			if d.state == chunkTrailer {
				err = d.trailerLine(line)
			} else {
				err = d.sizeLine(line)
			}
			if err != nil {
				return nOut, nIn, err
			}
		}
	}
	return nOut, nIn, nil
}

// chunkLine returns the line at the start of b without its CRLF, and its length with it;
// n is 0 when the line is not complete yet. Chunk lines must end in CRLF: a bare LF there
// is an error, as it is in net/http.
func chunkLine(b []byte) (line []byte, n int, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) >= maxChunkLine {
			return nil, 0, &ProtocolError{What: "chunk line longer than " + strconv.Itoa(maxChunkLine) + " bytes"}
		}
		return nil, 0, nil
	}
	if i+1 > maxChunkLine {
		return nil, 0, &ProtocolError{What: "chunk line longer than " + strconv.Itoa(maxChunkLine) + " bytes"}
	}
	if i == 0 || b[i-1] != '\r' {
		return nil, 0, &ProtocolError{What: "chunk line not ended by CRLF"}
	}
	return b[:i-1], i + 1, nil
}

// sizeLine parses "hex-size [BWS ; extension...]". Extensions are skipped, but must hold
// no control bytes other than tab.
func (d *bodyDecoder) sizeLine(line []byte) error {
	var size int64
	digits := 0
	for ; digits < len(line); digits++ {
		v := hexValue(line[digits])
		if v < 0 {
			break
		}
		if digits == 15 {
			// 16 hex digits could overflow an int64; no engine sends a chunk of 2^60 bytes.
			return &ProtocolError{What: "chunk size too large"}
		}
		size = size<<4 | int64(v)
	}
	if digits == 0 {
		return &ProtocolError{What: "bad chunk size " + quoteShort(string(line))}
	}
	if ext := bytes.TrimLeft(line[digits:], " \t"); len(ext) > 0 {
		if ext[0] != ';' || !validFieldValue(ext) {
			return &ProtocolError{What: "bad chunk size " + quoteShort(string(line))}
		}
	}
	if size == 0 {
		d.state = chunkTrailer
		return nil
	}
	d.remain, d.state = size, chunkData
	return nil
}

// trailerLine takes one line of the trailer: a field, checked and dropped (no engine
// sends one the gateway needs), or the empty line that ends the body.
func (d *bodyDecoder) trailerLine(line []byte) error {
	if len(line) == 0 {
		d.done = true
		return nil
	}
	d.trailerFields++
	d.trailerBytes += len(line) + 2
	if d.trailerFields > d.lim.maxFields || d.trailerBytes > d.lim.maxBytes {
		return &ProtocolError{What: "trailer over the header limits"}
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return &ProtocolError{What: "bare CR in trailer"}
	}
	_, err := parseField(string(line))
	return err
}

func hexValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// validFieldValue is httpguts.ValidHeaderFieldValue over bytes: no control byte but tab.
func validFieldValue(b []byte) bool {
	for _, c := range b {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
