package sse

// What engines write the same way in every chunk, read at once: when the bytes are exactly
// the pattern, the scan moves past them with the values the general scan would have found;
// anything else is left to it (FuzzClassify holds the two to the same answers).

// indexThenDelta reads, at the start of a choice object, the opening every streamed chat
// chunk of vLLM and SGLang has: "index":N,"delta":{ with N a plain non-negative integer.
// When the bytes are exactly that, it moves past them (into the delta object, its '{'
// consumed) and returns N, as choice's members "index" and "delta" would have; otherwise it
// moves nothing, and choice reads them one by one.
func (s *scanner) indexThenDelta() (int64, bool) {
	i, ok := literalAt(s.data, s.pos, `"index":`)
	if !ok {
		return 0, false
	}
	n, i, ok := plainInt(s.data, i)
	if !ok {
		return 0, false
	}
	if i, ok = literalAt(s.data, i, `,"delta":{`); !ok {
		return 0, false
	}
	s.pos = i
	return n, true
}

// choiceClosing is how vLLM closes a streamed chat choice that has not finished: no
// logprobs, no finish reason, the end of the choice object.
const choiceClosing = `,"logprobs":null,"finish_reason":null}`

// usageCounts reads the body of a usage object (its '{' consumed) when it is exactly
// vLLM's and SGLang's: "prompt_tokens":N,"total_tokens":N,"completion_tokens":N} with plain
// integers, moving past its '}' and returning completion_tokens as usage would; otherwise
// it moves nothing. The names are compared as constants, which the compiler does with a
// few word loads instead of a call each.
func (s *scanner) usageCounts() (int, bool) {
	data, i := s.data, s.pos
	if len(data)-i < 16 || string(data[i:i+16]) != `"prompt_tokens":` {
		return 0, false
	}
	// The byte after each number is ',' or '}': never a fraction or an exponent.
	_, i, ok := plainDigits(data, i+16)
	if !ok || len(data)-i < 16 || string(data[i:i+16]) != `,"total_tokens":` {
		return 0, false
	}
	if _, i, ok = plainDigits(data, i+16); !ok || len(data)-i < 21 ||
		string(data[i:i+16]) != `,"completion_tok` || string(data[i+16:i+21]) != `ens":` {
		return 0, false
	}
	n, i, ok := plainDigits(data, i+21)
	if !ok || i >= len(data) || data[i] != '}' {
		return 0, false
	}
	s.pos = i + 1
	return int(n), true // at most 15 digits: never above maxCount
}

// literalAt reports whether data holds lit at i, and the offset after it.
func literalAt(data []byte, i int, lit string) (int, bool) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// plainInt reads at i a JSON number that is a plain non-negative integer of at most 15
// digits (so never above maxCount) (no leading zero, no fraction, no exponent), its value
// and the offset after it. Anything else (including what JSON would refuse) is not read:
// false.
func plainInt(data []byte, i int) (n int64, end int, ok bool) {
	n, end, ok = plainDigits(data, i)
	if ok && end < len(data) {
		if c := data[end]; c == '.' || c == 'e' || c == 'E' {
			return 0, i, false
		}
	}
	return n, end, ok
}

// plainDigits reads the run of digits at i: its value and the offset after it, ok when
// there are 1 to 15 of them and no leading zero. A number is plainInt only when no '.',
// 'e' or 'E' follows; a caller that then requires ',' or '}' has checked that already.
func plainDigits(data []byte, i int) (n int64, end int, ok bool) {
	start := i
	var u uint64 // wraps past 19 digits, but more than 15 are refused anyway
	for ; i < len(data) && data[i]-'0' <= 9; i++ {
		u = u*10 + uint64(data[i]-'0')
	}
	digits := i - start
	return int64(u), i, digits > 0 && digits <= 15 && (digits == 1 || data[start] != '0')
}

// usageMember reads, at a member boundary after the top-level object's first member, the
// usage member as vLLM and SGLang write it: `,"usage":` and either null or the counts
// usageCounts reads. It moves past it and records it in sum as the "usage" case of
// topObject would (the member's span runs from its comma); otherwise it moves nothing.
func (s *scanner) usageMember(sum *Summary) bool {
	data, i := s.data, s.pos
	if len(data)-i < 13 || string(data[i:i+9]) != `,"usage":` {
		return false
	}
	if string(data[i+9:i+13]) == "null" {
		sum.CompletionTokens = -1
		sum.UsageStart, sum.UsageEnd = i, i+13
		s.pos = i + 13
		return true
	}
	if data[i+9] != '{' {
		return false
	}
	s.pos = i + 10
	n, ok := s.usageCounts()
	if !ok {
		s.pos = i
		return false
	}
	sum.Class |= Usage
	sum.CompletionTokens = n
	sum.UsageStart, sum.UsageEnd = i, s.pos
	return true
}
