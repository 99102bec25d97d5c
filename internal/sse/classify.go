package sse

import (
	"bytes"
	"math"
)

// Summary is what the gateway needs to know about one data payload, gathered
// in a single pass over its JSON (see Summarize).
type Summary struct {
	// Class says what the payload carries (see Classify).
	Class Class
	// Outputs is the number of choices that carry output (see Count).
	Outputs int
	// Finished has bit i set when a choice with index i (0 to 63) has a
	// non-null finish_reason, so that a stream with several choices (n > 1, or
	// a completions prompt array) can be known to be complete only once every
	// choice has finished, not at the first finish. A choice's index is its
	// "index" member when that is a non-negative integer (see CompletionTokens
	// for what counts as one), else its position in "choices": engines send
	// the index, and without one the position is the best guess.
	Finished uint64
	// FinishedHigh counts the finishing choices whose index is 64 or more,
	// which Finished cannot hold. A choice that finishes is counted in exactly
	// one of Finished and FinishedHigh, so Class has Finish exactly when
	// either is non-zero.
	FinishedHigh int
	// CompletionTokens is the completion_tokens member of the top-level usage
	// object, or -1 when there is no such object or the member is not a
	// non-negative integer no larger than 2^53 (the largest every JSON client
	// decodes exactly). As for the integer fields of a request, a number
	// without a fractional part counts whatever its spelling: 4, 4.0 and 40e-1
	// are all 4.
	CompletionTokens int
	// UsageStart and UsageEnd delimit the top-level "usage" member, whatever
	// its value (null included: some engines send "usage":null in every chunk,
	// which a client that did not ask for usage should not see either),
	// together with one comma next to it: the one before it, or the one after
	// it when it is the first member. So
	// append(data[:UsageStart:UsageStart], data[UsageEnd:]...) is the payload
	// without it, the other members untouched. Both are 0 when there is no such
	// member. Should "usage" be repeated, they mark the last one, the one a
	// JSON decoder keeps; StripUsage removes them all.
	UsageStart, UsageEnd int
	// Sequence is a Responses event's sequence_number, or -1.
	Sequence int64
	// Choice is the index of the chunk's only choice (as for Finished), or -1
	// when "choices" is absent or holds no choice or several. Engines that
	// report usage in every chunk send one choice per chunk, and the usage is
	// that choice's, so this says whose tokens the usage counts.
	Choice int
}

// maxCount is the largest integer read from a payload as a count or index:
// 2^53, beyond which not every client decodes a JSON number exactly (or the
// largest int, on a 32-bit platform). Anything larger reads as maxCount+1.
const maxCount = min(1<<53, math.MaxInt)

// Summarize reports what a data payload carries and where its usage is, in
// one pass over the JSON that looks only at the few keys it needs and
// validates (but does not decode) everything else. It never allocates.
// Nothing in an invalid payload can be trusted, so for one the Summary is
// just Class Malformed with CompletionTokens -1; a payload that is not an
// object ([DONE] included) has no choices and no usage either.
func Summarize(data []byte) Summary {
	var sum Summary
	summarizeFrom(&sum, data, 0, nil)
	return sum
}

// summarizeFrom is Summarize, into *sum (a Summary is ten words: one copy fewer per event
// than returning it), and reports whether the JSON was valid without a CR between its
// tokens: then data holds no CR outside what memo skipped (see streamMemo.summarizeLine).
// With resume > 0, data[:resume] is '{' and whole members that carry nothing looked for,
// already proved valid (see streamMemo), and the scan starts after them. With memo, the
// scan skips the "choices" member and the trailing members it remembers where it can, and
// remembers this chunk's; from a scan that starts at the beginning (resume 0), it also
// remembers the leading run of members that carry nothing.
func summarizeFrom(sum *Summary, data []byte, resume int, memo *streamMemo) (noCR bool) {
	if resume == 0 {
		if string(data) == "[DONE]" {
			*sum = Summary{Class: Done, CompletionTokens: -1, Choice: -1, Sequence: -1}
			return true
		}
		if string(bytes.TrimSpace(data)) == "null" {
			// llama.cpp's server sends "data: null" between the choices of one prompt and
			// the next: no chunk at all, and the official Node SDK fails on it. It carries
			// no more than a comment, and is dropped as one.
			*sum = Summary{Class: Comment, CompletionTokens: -1, Choice: -1, Sequence: -1}
			return false
		}
	}
	s := scanner{data: data}
	*sum = Summary{CompletionTokens: -1, Choice: -1, Sequence: -1}
	plainEnd := 0
	if resume > 0 {
		s.pos = resume
		s.topObject(sum, false, memo)
	} else if s.peek() == '{' {
		s.pos++
		plainEnd = s.topObject(sum, true, memo)
	} else {
		// Valid JSON that is not an object carries nothing we look for.
		s.skip(0)
	}
	if s.bad || s.skipSpace() {
		*sum = Summary{Class: Malformed, CompletionTokens: -1, Choice: -1, Sequence: -1}
		return false
	}
	if memo != nil {
		if resume == 0 {
			memo.remember(data, plainEnd)
		}
		// The object's end alone, which the scan reads at once, is not worth a comparison;
		// what the memo holds stays (a memo is never wrong, only useless).
		if s.tailFrom > 0 && len(data)-s.tailFrom > 2 {
			memo.tail.learn(data[s.tailFrom:])
		}
	}
	if sum.Class&Error != 0 {
		sum.Class &^= NullError // an error it is; nothing to strip
	}
	return !s.sawCR
}

// Classify reports what a data payload carries: Summarize(data).Class. See the
// Class constants for the meaning of each bit; Malformed is returned alone,
// since nothing in an invalid payload can be trusted. It never allocates.
func Classify(data []byte) Class {
	return Summarize(data).Class
}

// Count returns the number of choices in a chunk that carry output (see
// Output): one delivered output token per output-bearing choice delta. It is 0
// for malformed data and never allocates.
func Count(data []byte) int {
	return Summarize(data).Outputs
}

// ClassifyCount is Classify and Count in one pass.
func ClassifyCount(data []byte) (Class, int) {
	sum := Summarize(data)
	return sum.Class, sum.Outputs
}

// topObject scans the members of the chunk object (its '{' consumed), from the first one
// when first is true, else from the ',' or '}' after a member; the members before (if any)
// carried nothing it looks for. It returns the end of the leading members that carried
// nothing it looks for (see streamMemo), 0 when there are none, or when there are none in
// this scan beside the ones before it. With memo, it skips the "choices" member memo
// remembers, should it come first in this scan (see choicesMemo), or else remembers the
// chunk's "choices" member there when it comes right after the leading run; and it skips
// the trailing members memo remembers (see tailMemo), or else sets s.tailFrom for the
// caller to remember them.
func (s *scanner) topObject(sum *Summary, first bool, memo *streamMemo) (plainEnd int) {
	var buf [24]byte
	plain := true // still in the leading run of members that carry nothing: *sum is as it was
	if memo != nil && memo.choices.skip(s, sum, first) {
		plain, first = false, false
		s.tailFrom = s.pos
	}
	for ; ; first = false {
		prev := s.pos // just past the previous member's value, or the '{'
		if plain && !first {
			plainEnd = prev
		} else if !plain && memo != nil && memo.tail.skip(s) {
			s.tailFrom = 0 // nothing new to remember
			return plainEnd
		}
		if !first && s.usageMember(sum) {
			plain = false
			s.tailFrom = s.pos
			continue
		}
		raw, ok := s.nextKey(first)
		if !ok {
			return plainEnd
		}
		switch string(s.name(raw, &buf)) {
		case "choices":
			learn := plain && memo != nil
			plain = false
			s.outputs = 0
			s.choices(sum)
			if learn && !s.bad {
				memo.choices.learn(s.data, prev, s.pos, first, s, *sum)
			}
			s.tailFrom = s.pos
		case "usage":
			plain = false
			key := s.keyStart(raw)
			// A repeated member replaces the earlier one, as when decoding.
			sum.CompletionTokens = -1
			if s.peek() == '{' {
				s.pos++
				sum.Class |= Usage
				if n, ok := s.usageCounts(); ok {
					sum.CompletionTokens = n
				} else {
					sum.CompletionTokens = s.usage()
				}
			} else {
				s.skip(1)
			}
			sum.UsageStart, sum.UsageEnd = memberSpan(s.data, first, prev, key, s.pos)
			s.tailFrom = s.pos
		case "error":
			plain = false
			if s.notNull(1) {
				sum.Class |= Error
			} else if !s.bad {
				sum.Class |= NullError
			}
			s.tailFrom = s.pos
		case "object":
			if s.peek() == '"' {
				v, ok := s.str()
				if ok && string(s.name(v, &buf)) == "error" {
					plain = false
					sum.Class |= Error
					s.tailFrom = s.pos
				}
			} else {
				s.skip(1)
			}
		default:
			s.skip(1)
		}
	}
}

// usage scans the top-level usage object (its '{' consumed, at depth 2) and
// returns its completion_tokens, or -1.
func (s *scanner) usage() int {
	tokens := -1
	var buf [24]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return tokens
		}
		if string(s.name(raw, &buf)) != "completion_tokens" {
			s.skip(2)
			continue
		}
		tokens = -1
		if n := s.wholeValue(2); n <= maxCount {
			tokens = int(n)
		}
	}
}

// choices scans the value of "choices" (depth 1 holds it).
func (s *scanner) choices(sum *Summary) {
	if s.peek() != '[' {
		s.skip(1)
		return
	}
	s.pos++
	choices := 0
	for pos := 0; s.nextElem(pos == 0); pos++ {
		if s.peek() != '{' {
			s.skip(2)
			continue
		}
		s.pos++
		output, finish, tools, index := s.choice()
		if choices++; choices == 1 {
			sum.Choice = pos
			if index >= 0 && index <= maxCount {
				sum.Choice = int(index)
			}
		} else {
			sum.Choice = -1
		}
		if output {
			sum.Class |= Output
			sum.Outputs++
		}
		if tools {
			sum.Class |= ToolCalls
		}
		if finish {
			sum.Class |= Finish
			if index < 0 {
				index = int64(pos)
			}
			if index < 64 {
				sum.Finished |= 1 << index
			} else {
				sum.FinishedHigh++
			}
		}
	}
}

// choice scans one choice object (its '{' consumed, at depth 3). index is the
// value of its "index" member, -1 when that is absent or not a non-negative
// integer.
func (s *scanner) choice() (output, finish, tools bool, index int64) {
	index = -1
	var buf [24]byte
	first := true
	if i, ok := s.indexThenDelta(); ok {
		// The members every chat chunk opens its choice with, read at once.
		index, first = i, false
		o, t := s.delta()
		output, tools = o, t
		if end, ok := literalAt(s.data, s.pos, choiceClosing); ok {
			s.pos = end
			return output, false, tools, index
		}
	}
	for ; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return output, finish, tools, index
		}
		switch string(s.name(raw, &buf)) {
		case "delta", "message":
			if s.peek() != '{' {
				s.skip(3)
				continue
			}
			s.pos++
			o, t := s.delta()
			output = output || o
			tools = tools || t
		case "text":
			if s.outputString(3) {
				output = true
			}
		case "finish_reason":
			if s.notNull(3) {
				finish = true
			}
		case "index":
			index = s.wholeValue(3)
		default:
			s.skip(3)
		}
	}
}

// delta scans a delta (stream) or message (non-stream) object, its '{'
// consumed, at depth 4, and reports whether it carries output and tool calls.
func (s *scanner) delta() (output, tools bool) {
	var buf [24]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return output, tools
		}
		switch string(s.name(raw, &buf)) {
		case "content", "reasoning_content", "reasoning":
			if s.outputString(4) {
				output = true
			}
		case "tool_calls":
			if s.nonEmptyArray(4) {
				output, tools = true, true
			}
		default:
			s.skip(4)
		}
	}
}
