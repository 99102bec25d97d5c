package openai

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads a JSON text in one pass, front to back, accepting exactly what
// encoding/json.Valid accepts and, when it refuses, naming the first fault in
// encoding/json's own words. On top of that it refuses what checkBody refuses:
// bytes that are not UTF-8 inside strings (outside them only ASCII is JSON) and
// nesting deeper than MaxDepth. Its callers pull values from it (value, str,
// nextMember, nextElement), so that a reader of one member, such as "messages",
// can look inside it during the same pass while the rest is only validated.
//
// Nothing is allocated and nothing is decoded unless a caller asks: str returns a
// string's decoded length, unquote decodes it later from its bytes.
//
// Once fail is set the scan is over: every method returns at once, and callers
// check s.failed() after a loop. The first fault is the one reported, as
// encoding/json reports the first.
//
// The text may still be arriving (src): b is then what was read so far, and the
// scanner reads more where it reaches b's end (fill), so that a body is parsed while
// the rest of it is on its way. Slices of b stay valid: b only grows, over the one
// buffer the body is read into.
type scanner struct {
	b     []byte
	src   *source // nil: b is the whole text
	i     int     // the next byte to read
	depth int     // arrays and objects open around s.i
	fail  fault
	// key is the last member key nextMember read, quotes included, and keyLen its
	// decoded length.
	key    []byte
	keyLen int
}

// faultKind says what stopped a scan.
type faultKind uint8

const (
	faultNone   faultKind = iota
	faultSyntax           // not JSON: c in context, or an unexpected end
	faultUTF8             // a string holds bytes that are not UTF-8
	faultDepth            // nesting deeper than MaxDepth
	faultRead             // the text could not be read (source.err)
)

// fault is the first problem of a scan, kept as data: its message is only built
// if it is reported.
type fault struct {
	kind    faultKind
	eof     bool   // the text ended too early
	c       byte   // the offending byte
	context string // encoding/json's words for where c was found
}

// message is encoding/json's SyntaxError text for a syntax fault.
func (f fault) message() string {
	if f.eof {
		return "unexpected end of JSON input"
	}
	return "invalid character " + quoteChar(f.c) + " " + f.context
}

// quoteChar formats c as encoding/json's scanner does in its messages.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

func (s *scanner) failed() bool { return s.fail.kind != faultNone }

// syntax records a syntax fault at byte c (or at the end of the text).
func (s *scanner) syntax(c byte, context string) {
	if s.fail.kind == faultNone {
		s.fail = fault{kind: faultSyntax, c: c, context: context}
	}
}

// unexpectedEnd records that the text ended inside a value.
func (s *scanner) unexpectedEnd() {
	if s.fail.kind == faultNone {
		s.fail = fault{kind: faultSyntax, eof: true}
	}
}

// source is a text still arriving: it is read from r into buf, which is as long as
// the whole text.
type source struct {
	r   io.Reader
	buf []byte
	err error // why the text ended before buf was full
}

// fill makes s.b hold at least n bytes, reading more of the text when it is still
// arriving, and reports whether it does. A read error ends the scan (faultRead).
func (s *scanner) fill(n int) bool {
	for len(s.b) < n && s.src != nil {
		src := s.src
		m, err := src.r.Read(src.buf[len(s.b):])
		s.b = src.buf[:len(s.b)+m]
		switch {
		case len(s.b) == len(src.buf):
			s.src = nil
		case err == io.EOF:
			err = io.ErrUnexpectedEOF // shorter than it said, as io.ReadFull reports it
			fallthrough
		case err != nil:
			src.err, s.src = err, nil
			s.fail = fault{kind: faultRead}
		}
	}
	return len(s.b) >= n
}

// at returns the byte at i, or a space past the end: encoding/json ends a scan by
// feeding its state machine one space, so a text cut inside a number or a literal
// is reported as an invalid ' ' there, and one cut elsewhere as an unexpected end.
func (s *scanner) at(i int) byte {
	if i < len(s.b) || s.fill(i+1) {
		return s.b[i]
	}
	return ' '
}

// space skips JSON whitespace.
func (s *scanner) space() {
	for {
		b, i := s.b, s.i
		for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
			i++
		}
		s.i = i
		if i < len(b) || !s.fill(i+1) {
			return
		}
	}
}

// peek skips whitespace and returns the next byte; at the end of the text it records
// an unexpected end and returns 0.
func (s *scanner) peek() byte {
	s.space()
	if s.i >= len(s.b) {
		s.unexpectedEnd()
		return 0
	}
	return s.b[s.i]
}

// value reads one value of any kind, whitespace before it included. It returns
// where the value starts; it ends at s.i.
func (s *scanner) value() int {
	c := s.peek()
	start := s.i
	switch {
	case s.failed():
	case c == '"':
		s.str()
	case c == '{':
		if s.open() {
			for s.nextMember(s.i == start+1) {
				s.value()
			}
		}
	case c == '[':
		if s.open() {
			for s.nextElement(s.i == start+1) {
				s.value()
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	default:
		s.syntax(c, "looking for beginning of value")
	}
	return start
}

// open enters the array or object whose bracket is at s.i.
func (s *scanner) open() bool {
	if s.depth++; s.depth > MaxDepth {
		s.fail = fault{kind: faultDepth}
		return false
	}
	s.i++
	return true
}

// nextMember moves to the next member of the object being read: it reads the key
// and the colon and returns true with s.i before the member's value, which the
// caller must read; or it reads the closing brace and returns false. first is true
// right after the opening brace. After false the caller checks s.failed().
func (s *scanner) nextMember(first bool) bool {
	if s.failed() {
		return false
	}
	c := s.peek()
	switch {
	case s.failed():
		return false
	case first && c == '}':
		s.i++
		s.depth--
		return false
	case first:
	case c == ',':
		s.i++
		c = s.peek()
	case c == '}':
		s.i++
		s.depth--
		return false
	default:
		s.syntax(c, "after object key:value pair")
		return false
	}
	if s.failed() {
		return false
	}
	if c != '"' {
		s.syntax(c, "looking for beginning of object key string")
		return false
	}
	start := s.i
	s.keyLen = s.str()
	s.key = s.b[start:s.i]
	if c = s.peek(); s.failed() {
		return false
	}
	if c != ':' {
		s.syntax(c, "after object key")
		return false
	}
	s.i++
	return true
}

// nextElement moves to the next element of the array being read: it returns true
// with s.i before the element, which the caller must read, or reads the closing
// bracket and returns false. first is true right after the opening bracket.
func (s *scanner) nextElement(first bool) bool {
	if s.failed() {
		return false
	}
	c := s.peek()
	switch {
	case s.failed():
		return false
	case c == ']' && first:
		s.i++
		s.depth--
		return false
	case first:
		return true
	case c == ',':
		s.i++
		return true
	case c == ']':
		s.i++
		s.depth--
		return false
	}
	s.syntax(c, "after array element")
	return false
}

// literal reads true, false or null.
func (s *scanner) literal(word string) {
	for j := 1; j < len(word); j++ {
		if c := s.at(s.i + j); c != word[j] {
			s.syntax(c, "in literal "+word+" (expecting "+quoteChar(word[j])+")")
			return
		}
	}
	s.i += len(word)
}

// number reads a number as encoding/json's state machine does: it stops at the
// first byte that cannot continue it, which the caller then judges.
func (s *scanner) number() {
	i := s.i
	digits := func() {
		for c := s.at(i); c >= '0' && c <= '9'; c = s.at(i) {
			i++
		}
	}
	if s.b[i] == '-' {
		i++
		if c := s.at(i); c < '0' || c > '9' {
			s.syntax(c, "in numeric literal")
			return
		}
	}
	if s.b[i] == '0' {
		i++
	} else {
		digits()
	}
	if s.at(i) == '.' {
		i++
		if c := s.at(i); c < '0' || c > '9' {
			s.syntax(c, "after decimal point in numeric literal")
			return
		}
		digits()
	}
	if c := s.at(i); c == 'e' || c == 'E' {
		i++
		if c := s.at(i); c == '+' || c == '-' {
			i++
		}
		if c := s.at(i); c < '0' || c > '9' {
			s.syntax(c, "in exponent of numeric literal")
			return
		}
		digits()
	}
	s.i = i
}

// SWAR constants: a byte repeated in each of a word's eight lanes, and each lane's
// top bit.
const (
	lanes = 0x0101010101010101
	tops  = 0x8080808080808080
)

// specialLanes marks, in the top bit of its lane, each byte of x that ends a run of
// plain string content: '"', '\\' or a control byte. A lane above a marked one may
// be marked falsely (a borrow), never one below it, so the lowest mark is exact.
func specialLanes(x uint64) uint64 {
	q := x ^ (lanes * '"')
	e := x ^ (lanes * '\\')
	return ((q-lanes)&^q | (e-lanes)&^e | (x-lanes*0x20)&^x) & tops
}

// str reads a string whose opening quote is at s.i and returns the length of its
// decoded contents (what encoding/json's Unmarshal makes of it). Plain ASCII is
// scanned eight bytes at a time; a byte above 0x7f starts a UTF-8 sequence, checked
// right there, and an escape is read where it is met, so that no byte is read twice.
func (s *scanner) str() int {
	b := s.b
	start := s.i + 1
	i := start
	shrink := 0 // bytes the escapes lose in decoding
	for {
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			// The lowest marked lane is exact (see specialLanes; a byte above 0x7f
			// marks its own lane only).
			if m := specialLanes(x) | x&tops; m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i+8 > len(b) { // near the end of what has arrived: read on, if there is more
			if s.src != nil {
				s.fill(i + 8)
				if b = s.b; i+8 <= len(b) {
					continue
				}
			}
			if s.failed() { // a read error
				return 0
			}
			if i >= len(b) {
				s.unexpectedEnd()
				return 0
			}
		}
		// The cases in the order of how often a conversation meets them.
		switch c := b[i]; {
		case c == '\\' && i+1 < len(b) && shortEscape[b[i+1]]:
			i += 2
			shrink++
		case c >= 0xc2 && c < 0xe0 && i+1 < len(b) && b[i+1]&0xc0 == 0x80: // two bytes
			i += 2
		case c >= utf8.RuneSelf:
			n := utf8Seq(b, i)
			if n == 0 {
				s.fail = fault{kind: faultUTF8}
				return 0
			}
			i += n
		case c == '"':
			s.i = i + 1
			return i - start - shrink
		case c == '\\':
			n, lost := s.escape(i)
			if n == 0 {
				return 0
			}
			b = s.b
			i += n
			shrink += lost
		case c < 0x20:
			s.syntax(c, "in string literal")
			return 0
		default:
			i++
		}
	}
}

// shortEscape marks the bytes that make a two-byte escape after a backslash.
var shortEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// utf8Seq returns the length of the UTF-8 sequence that starts at b[i] (a byte above
// 0x7f), or 0 when it is not valid UTF-8 as utf8.Valid judges it: no overlong forms,
// no surrogates, nothing above U+10FFFF.
func utf8Seq(b []byte, i int) int {
	cont := func(j int) bool { return j < len(b) && b[j]&0xc0 == 0x80 }
	in := func(j int, lo, hi byte) bool { return j < len(b) && b[j] >= lo && b[j] <= hi }
	switch c := b[i]; {
	case c < 0xc2:
	case c < 0xe0:
		if cont(i + 1) {
			return 2
		}
	case c < 0xf0:
		lo, hi := byte(0x80), byte(0xbf)
		switch c {
		case 0xe0:
			lo = 0xa0
		case 0xed:
			hi = 0x9f
		}
		if in(i+1, lo, hi) && cont(i+2) {
			return 3
		}
	case c < 0xf5:
		lo, hi := byte(0x80), byte(0xbf)
		switch c {
		case 0xf0:
			lo = 0x90
		case 0xf4:
			hi = 0x8f
		}
		if in(i+1, lo, hi) && cont(i+2) && cont(i+3) {
			return 4
		}
	}
	return 0
}

// escape reads the escape sequence whose backslash is at i and returns its length
// and how many bytes shorter its decoding is (0, 0 on a fault). \u escapes decode
// as encoding/json decodes them: a valid surrogate pair to one character, a lone
// surrogate to U+FFFD.
func (s *scanner) escape(i int) (n, lost int) {
	switch c := s.at(i + 1); c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, 1
	case 'u':
	default:
		s.syntax(c, "in string escape code")
		return 0, 0
	}
	r, ok := s.hex4(i + 2)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return 6, 6 - utf8.RuneLen(r)
	}
	if s.fill(i + 12); s.at(i+6) == '\\' && s.at(i+7) == 'u' {
		if r2, ok := hex4(s.b, i+8); ok && utf16.DecodeRune(r, r2) != utf8.RuneError {
			return 12, 12 - 4
		}
	}
	return 6, 6 - 3 // U+FFFD
}

// hex4 reads the four hex digits of a \u escape at i, recording a fault at the
// first byte that is not one.
func (s *scanner) hex4(i int) (rune, bool) {
	var r rune
	for j := i; j < i+4; j++ {
		d := unhex(s.at(j))
		if d < 0 {
			s.syntax(s.at(j), `in \u hexadecimal character escape`)
			return 0, false
		}
		r = r<<4 | d
	}
	return r, true
}

// hex4 reads four hex digits at b[i:], if they are there.
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		d := unhex(c)
		if d < 0 {
			return 0, false
		}
		r = r<<4 | d
	}
	return r, true
}

func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// appendUnquoted appends the decoded contents of a string the scanner accepted
// (raw is between its quotes) to dst, as encoding/json decodes it, stopping once
// dst holds at least limit bytes.
func appendUnquoted(dst, raw []byte, limit int) []byte {
	for i := 0; i < len(raw) && len(dst) < limit; {
		// Plain bytes up to the next escape, looked for no further than needed.
		plain := raw[i:min(len(raw), i+limit-len(dst))]
		if j := bytes.IndexByte(plain, '\\'); j >= 0 {
			plain = plain[:j]
		}
		dst = append(dst, plain...)
		if i += len(plain); i >= len(raw) || len(dst) >= limit {
			break
		}
		switch c := raw[i+1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(raw, i+2); ok && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						dst = utf8.AppendRune(dst, d)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		i += 2
	}
	return dst
}

// unquote decodes a whole string the scanner accepted, quotes included.
func unquote(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			return string(appendUnquoted(make([]byte, 0, len(inner)), inner, len(inner)))
		}
	}
	return string(inner)
}
