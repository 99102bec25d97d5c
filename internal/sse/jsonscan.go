package sse

import (
	"encoding/binary"
	"math/bits"
)

// This file is a small JSON scanner that validates while it skips. It accepts
// exactly what encoding/json.Valid accepts (including its nesting limit), so a
// chunk Classify calls well-formed is one any client can decode. It never
// allocates: the container stack for skipping is a fixed array on the stack.

// maxDepth is encoding/json's nesting limit; deeper input is not valid JSON to
// a Go client, so it is Malformed to us too.
const maxDepth = 10000

type scanner struct {
	data []byte
	pos  int
	bad  bool // set on the first syntax error; every method then fails fast
	// escaped is true when the last string scanned had a backslash escape,
	// so its raw bytes differ from its value.
	escaped bool
	// outputs counts the output strings read by outputString since it was last set to 0,
	// and outputAt and outputEnd delimit the last one: its opening quote, and the byte
	// after its closing one (see choicesMemo).
	outputs             int
	outputAt, outputEnd int
	// sawCR is set when skipSpace moves past a CR: the only place a valid text has one.
	sawCR bool
	// tailFrom is, in a chunk object, the end of the last member that carried something
	// looked for: the members after it carry nothing (see tailMemo). 0 when there is none,
	// or when what follows it was remembered already.
	tailFrom int
}

func (s *scanner) fail() bool {
	s.bad = true
	return false
}

// skipSpace moves past JSON whitespace and reports whether a byte follows.
func (s *scanner) skipSpace() bool {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n':
			s.pos++
		case '\r':
			s.sawCR = true
			s.pos++
		default:
			return true
		}
	}
	return false
}

// peek returns the next non-space byte without consuming it, 0 at the end.
// Engines send compact JSON, so the next byte is almost always the one: that
// case is checked first, inline, without the loop.
func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		if c := s.data[s.pos]; c > ' ' {
			return c
		}
	}
	if !s.skipSpace() {
		return 0
	}
	return s.data[s.pos]
}

// consume moves past c if it is the next non-space byte.
func (s *scanner) consume(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++ // compact JSON: c is the very next byte
		return true
	}
	if s.peek() != c {
		return false
	}
	s.pos++
	return true
}

// expect is consume that records a syntax error on mismatch.
func (s *scanner) expect(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	if s.consume(c) {
		return true
	}
	return s.fail()
}

// stringSafe marks bytes that may appear unescaped inside a JSON string and
// need no further thought: everything but control bytes, '"' and '\\'.
var stringSafe = func() (t [256]bool) {
	for i := 0x20; i < 256; i++ {
		t[i] = i != '"' && i != '\\'
	}
	return t
}()

// str scans a string starting at its opening quote (after whitespace) and
// returns its raw contents, escapes left as they are.
func (s *scanner) str() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, s.fail()
	}
	data := s.data
	i := s.pos + 1
	start := i
	s.escaped = false
	for {
		// skipPlain, inline (a call per string costs a tenth of the scan): most
		// strings of a chunk are keys, ids and model names without escapes, ended
		// by the first quote this finds.
		for i+8 <= len(data) {
			if m := specialBytes(binary.LittleEndian.Uint64(data[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				goto special
			}
			i += 8
		}
		for i < len(data) && stringSafe[data[i]] {
			i++
		}
	special:
		if i >= len(data) {
			return nil, s.fail()
		}
		switch data[i] {
		case '"':
			s.pos = i + 1
			return data[start:i], true
		case '\\':
			if i+1 >= len(data) {
				return nil, s.fail()
			}
			s.escaped = true
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || !isHex4(data[i+2:i+6]) {
					return nil, s.fail()
				}
				i += 6
			default:
				return nil, s.fail()
			}
		default: // a control byte
			return nil, s.fail()
		}
	}
}

// skipPlain returns the index of the first byte at or after i that is a
// quote, a backslash or a control byte, or len(data). str has its loop inline;
// the tests hold the two to the same answers.
func skipPlain(data []byte, i int) int {
	// Eight bytes at a time: most of a chunk is ids, model names and text
	// without escapes.
	for i+8 <= len(data) {
		if m := specialBytes(binary.LittleEndian.Uint64(data[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(data) && stringSafe[data[i]] {
		i++
	}
	return i
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// specialBytes sets the high bit of each byte of x (read little-endian) that
// is a quote, a backslash or a control byte. Each term is the classic "has a
// byte less than n" trick: it may also flag bytes after a true match, but
// never before one, so the lowest set bit always marks the first special byte.
func specialBytes(x uint64) uint64 {
	quote := x ^ (lowBits * '"')
	backslash := x ^ (lowBits * '\\')
	m := (quote - lowBits) &^ quote
	m |= (backslash - lowBits) &^ backslash
	m |= (x - lowBits*0x20) &^ x
	return m & highBits
}

// name returns the value of a key or short string just scanned by str, for
// comparison with the names Classify looks for. Without escapes that is raw
// itself; otherwise it is decoded into buf (see keyName).
func (s *scanner) name(raw []byte, buf *[24]byte) []byte {
	if !s.escaped {
		return raw
	}
	return keyName(raw, buf)
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	data := s.data
	i := s.pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return s.fail()
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return s.fail()
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return s.fail()
		}
		i = j
	}
	s.pos = i
	return true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// literal scans true, false or null.
func (s *scanner) literal(word string) bool {
	end := s.pos + len(word)
	if end > len(s.data) || string(s.data[s.pos:end]) != word {
		return s.fail()
	}
	s.pos = end
	return true
}

// isNull reports whether the next value is the literal null, consuming it if so.
func (s *scanner) isNull() bool {
	if s.peek() != 'n' {
		return false
	}
	return s.literal("null")
}

// scalar scans a string, number or literal starting at the next byte.
func (s *scanner) scalar(c byte) bool {
	switch c {
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// skip validates and moves past one value. depth is the nesting depth of the
// container holding the value (0 at the top level).
func (s *scanner) skip(depth int) bool {
	c := s.peek()
	switch c {
	case '"':
		_, ok := s.str()
		return ok
	case 'n':
		return s.literal("null")
	case '{', '[':
	default:
		return s.scalar(c)
	}
	// Containers are walked with an explicit stack so hostile input cannot
	// recurse deeply; one bit per level: 1 for an object, 0 for an array.
	var stack [(maxDepth + 63) / 64]uint64
	n := 0 // open containers in this skip
	for {
		// At the start of a value.
		c = s.peek()
		switch c {
		case '{', '[':
			if depth+n+1 > maxDepth {
				return s.fail()
			}
			s.pos++
			if c == '{' {
				stack[n/64] |= 1 << (n % 64)
			} else {
				stack[n/64] &^= 1 << (n % 64)
			}
			n++
			closing := byte(']')
			if c == '{' {
				closing = '}'
			}
			if s.consume(closing) {
				n--
				break // an empty container is a complete value
			}
			if c == '{' && !s.key() {
				return false
			}
			continue
		default:
			if !s.scalar(c) {
				return false
			}
		}
		// After a complete value: close containers or move to the next element.
		for {
			if n == 0 {
				return true
			}
			inObject := stack[(n-1)/64]&(1<<((n-1)%64)) != 0
			if s.consume(',') {
				if inObject && !s.key() {
					return false
				}
				break
			}
			closing := byte(']')
			if inObject {
				closing = '}'
			}
			if !s.expect(closing) {
				return false
			}
			n--
		}
	}
}

// key scans an object key and the colon after it.
func (s *scanner) key() bool {
	if _, ok := s.str(); !ok {
		return false
	}
	return s.expect(':')
}

// nextKey is used inside an object whose '{' has been consumed. first is true
// for the first member. It returns the raw key and true when a member follows
// (positioned at its value), or false at the closing brace or on error.
func (s *scanner) nextKey(first bool) ([]byte, bool) {
	if s.bad {
		return nil, false
	}
	// Compact JSON, as engines send it, without a call per punctuation byte: '}', or
	// (after the first member) ',' then the key's quote.
	data, i := s.data, s.pos
	if i < len(data) {
		switch c := data[i]; {
		case c == '}':
			s.pos = i + 1
			return nil, false
		case c == ',' && !first && i+1 < len(data) && data[i+1] == '"':
			s.pos = i + 1
			return s.keyColon()
		case c == '"' && first:
			return s.keyColon()
		}
	}
	if s.consume('}') {
		return nil, false
	}
	if !first && !s.expect(',') {
		return nil, false
	}
	return s.keyColon()
}

// keyColon scans a key and the colon after it.
func (s *scanner) keyColon() ([]byte, bool) {
	k, ok := s.str()
	if !ok {
		return nil, false
	}
	if p := s.pos; p < len(s.data) && s.data[p] == ':' {
		s.pos = p + 1
		return k, true
	}
	if !s.expect(':') {
		return nil, false
	}
	return k, true
}

// keyStart returns the offset in data of the opening quote of raw, a key
// nextKey returned. raw is a slice of data that runs on to its end, so its
// capacity says where it starts; working it out only when a member is to be
// cut keeps the cost off every other key.
func (s *scanner) keyStart(raw []byte) int {
	return cap(s.data) - cap(raw) - 1
}

// nextElem is the array counterpart of nextKey: it reports whether another
// element follows, positioned at it.
func (s *scanner) nextElem(first bool) bool {
	if s.bad {
		return false
	}
	if s.consume(']') {
		return false
	}
	if !first && !s.expect(',') {
		return false
	}
	return true
}

// nonEmptyString consumes the next value and reports whether it is a string
// with at least one character. A raw string is non-empty exactly when its
// decoded form is, since every escape decodes to at least one character.
func (s *scanner) nonEmptyString(depth int) bool {
	if s.peek() != '"' {
		s.skip(depth)
		return false
	}
	raw, ok := s.str()
	return ok && len(raw) > 0
}

// outputString is nonEmptyString for a choice's output text, and records where the string
// lay when the value is one (see scanner.outputs).
func (s *scanner) outputString(depth int) bool {
	if s.peek() != '"' {
		s.skip(depth)
		return false
	}
	start := s.pos
	raw, ok := s.str()
	s.outputs++
	s.outputAt, s.outputEnd = start, s.pos
	return ok && len(raw) > 0
}

// nonEmptyArray consumes the next value and reports whether it is an array
// with at least one element.
func (s *scanner) nonEmptyArray(depth int) bool {
	if s.peek() != '[' {
		s.skip(depth)
		return false
	}
	start := s.pos
	s.pos++
	empty := s.peek() == ']'
	s.pos = start
	return s.skip(depth) && !empty
}

// notNull consumes the next value and reports whether it is something other
// than null.
func (s *scanner) notNull(depth int) bool {
	if s.isNull() {
		return false
	}
	return s.skip(depth)
}

// wholeValue consumes the next value and returns it when it is a number with
// a non-negative integer value (see wholeNumber), else -1.
func (s *scanner) wholeValue(depth int) int64 {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		s.skip(depth)
		return -1
	}
	start := s.pos
	if !s.number() {
		return -1
	}
	num := s.data[start:s.pos]
	if len(num) == 1 {
		return int64(num[0] - '0') // the usual "index":0
	}
	n, ok := wholeNumber(num)
	if !ok {
		return -1
	}
	return n
}

// wholeNumber reads a number that number() accepted and reports whether its
// value is a non-negative integer: 4, 4.0, 40e-1, 0.4e1 and -0 all are, 4.5,
// 45e-1 and -4 are not, exactly (no rounding through a float). Values above
// maxCount come back as maxCount+1, so nothing overflows however many digits
// or however large an exponent the number has.
func wholeNumber(num []byte) (int64, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	mant := num
	var exp int64
	for i, c := range num {
		if c != 'e' && c != 'E' {
			continue
		}
		mant = num[:i]
		digits := num[i+1:]
		expNeg := digits[0] == '-'
		if digits[0] == '-' || digits[0] == '+' {
			digits = digits[1:]
		}
		for _, d := range digits {
			// Past 2^40 the answer no longer depends on the exponent: no
			// payload has that many digits to make up for it.
			if exp < 1<<40 {
				exp = exp*10 + int64(d-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
		break
	}
	// The value is v * 10^(exp+zeros), where v holds the digits up to the
	// last non-zero one and zeros counts the zeros after it.
	var v, zeros int64
	fraction := false
	for _, c := range mant {
		switch {
		case c == '.':
			fraction = true
			continue
		case fraction:
			exp--
		}
		if c == '0' {
			zeros++
			continue
		}
		v = scale10(v, zeros+1) + int64(c-'0')
		v = min(v, maxCount+1)
		zeros = 0
	}
	if v == 0 {
		return 0, true // -0 and 0.0e9 are zero too
	}
	if neg {
		return 0, false
	}
	exp += zeros
	if exp < 0 {
		// v ends in a non-zero digit, so dividing it by a power of ten
		// leaves a fraction.
		return 0, false
	}
	return scale10(v, exp), true
}

// scale10 returns v * 10^n, saturating at maxCount+1.
func scale10(v, n int64) int64 {
	if v == 0 {
		return 0
	}
	for ; n > 0 && v <= maxCount; n-- {
		v *= 10
	}
	return min(v, maxCount+1)
}

// keyName decodes a raw key (or short string) into buf when it is plain ASCII
// that fits, resolving escapes, so it can be compared with the names we look
// for. It returns "" (matching none of them) otherwise. buf lives on the
// caller's stack, so nothing is allocated.
func keyName(raw []byte, buf *[24]byte) []byte { return decodeASCII(raw, buf[:]) }

// decodeASCII is keyName into a buffer of any size.
func decodeASCII(raw []byte, buf []byte) []byte {
	n := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' {
			switch raw[i+1] {
			case 'u':
				r := unhex4(raw[i+2 : i+6])
				if r >= 0x80 {
					return nil
				}
				c = byte(r)
				i += 6
			case '"', '\\', '/':
				c = raw[i+1]
				i += 2
			default: // \b \f \n \r \t: never part of a name we look for
				return nil
			}
		} else {
			if c >= 0x80 {
				return nil
			}
			i++
		}
		if n == len(buf) {
			return nil
		}
		buf[n] = c
		n++
	}
	return buf[:n]
}

func unhex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
