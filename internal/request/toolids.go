package request

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/internal/sse"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// toolCallIDs replaces the engine's tool call ids (random, different on every attempt)
// with ids derived from the logical request id and the call's position — its choice index
// and its index among that choice's calls (docs/design.md §5). They are the same across
// reruns, replays and takeovers of one logical request, and differ between requests, so a
// conversation never carries one id twice; they keep the engine's own shape (see
// toolCallID), so engines that parse ids back (Mistral's) accept them in the next turn.
// The id is then itself the idempotency key for whoever executes the call.
//
// Callers pass only chunks the scanner marked sse.ToolCalls. It returns data unchanged
// (and false) when the chunk names no tool call id (a continuation delta: arguments only).
func toolCallIDs(data []byte, stream bool, requestID string) ([]byte, bool) {
	field := "message"
	if stream {
		field = "delta"
	}
	out, changed := data, false
	gjson.GetBytes(data, "choices").ForEach(func(ci, choice gjson.Result) bool {
		choiceIndex := ci.Int()
		if idx := choice.Get("index"); idx.Type == gjson.Number {
			choiceIndex = idx.Int()
		}
		choice.Get(field + ".tool_calls").ForEach(func(ti, call gjson.Result) bool {
			id := call.Get("id")
			if id.Type != gjson.String {
				return true
			}
			n := ti.Int()
			if idx := call.Get("index"); idx.Type == gjson.Number {
				n = idx.Int()
			}
			path := "choices." + ci.String() + "." + field + ".tool_calls." + ti.String() + ".id"
			if rewritten, err := sjson.SetBytes(out, path, toolCallID(requestID, choiceIndex, n, id.String())); err == nil {
				out, changed = rewritten, true
			}
			return true
		})
		return true
	})
	return out, changed
}

// rewriteToolIDs is toolCallIDs for each API: chat completion tool_calls, the tool_use
// blocks of the Messages API (their "id", by content block index) and the function_call
// items of the Responses API (their "call_id", by output index). A Responses item's own "id"
// (fc_…) is left alone: it only ties the item's events together.
func rewriteToolIDs(p sse.Protocol, data []byte, stream bool, requestID string) ([]byte, bool) {
	switch p {
	case sse.Messages:
		if stream {
			if gjson.GetBytes(data, "content_block.type").String() != "tool_use" {
				return data, false
			}
			return rewriteID(data, "content_block.id", requestID, gjson.GetBytes(data, "index").Int())
		}
		return rewriteEach(data, "content", "tool_use", "id", requestID)
	case sse.Responses:
		if !stream {
			return rewriteEach(data, "output", "function_call", "call_id", requestID)
		}
		if gjson.GetBytes(data, "item.type").String() == "function_call" {
			return rewriteID(data, "item.call_id", requestID, gjson.GetBytes(data, "output_index").Int())
		}
		if gjson.GetBytes(data, "response.output").IsArray() {
			return rewriteEach(data, "response.output", "function_call", "call_id", requestID)
		}
		return data, false
	}
	return toolCallIDs(data, stream, requestID)
}

// rewriteID replaces the string at path with call n's id (choice 0).
func rewriteID(data []byte, path, requestID string, n int64) ([]byte, bool) {
	id := gjson.GetBytes(data, path)
	if id.Type != gjson.String {
		return data, false
	}
	newID := toolCallID(requestID, 0, n, id.String())
	if strings.HasSuffix(path, "call_id") {
		// vLLM's Responses API names one call in two shapes (call_… while streaming,
		// chatcmpl-tool-… in the final response); the client must see one id per call.
		newID = responsesCallID(requestID, n, id.String())
	}
	out, err := sjson.SetBytes(data, path, newID)
	if err != nil {
		return data, false
	}
	return out, true
}

// rewriteEach rewrites member field of every element of the array at path whose type is
// typ, its position in the array being the call's.
func rewriteEach(data []byte, path, typ, field, requestID string) ([]byte, bool) {
	out, changed := data, false
	gjson.GetBytes(data, path).ForEach(func(i, item gjson.Result) bool {
		if item.Get("type").String() != typ {
			return true
		}
		if d, ok := rewriteID(out, path+"."+i.String()+"."+field, requestID, i.Int()); ok {
			out, changed = d, true
		}
		return true
	})
	return out, changed
}

// Alphabets of tool call ids.
const (
	hexDigits    = "0123456789abcdef"
	alphanumeric = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	// minRandomPart keeps derived ids unique across requests when an engine's own ids
	// are short.
	minRandomPart = 16
)

// toolCallID derives the id of call n of choice c of a logical request, in the shape of
// the id the engine gave it:
//   - nine alphanumeric characters (Mistral's tool call ids, which its parser checks)
//     stay nine alphanumeric characters;
//   - an id with a prefix ("chatcmpl-tool-…", "call_…") keeps the prefix, and its random
//     part keeps its alphabet (hex or alphanumeric) and length (at least 16);
//   - anything else becomes "call_" and 24 alphanumeric characters, as OpenAI's.
func toolCallID(requestID string, c, n int64, engineID string) string {
	seed := requestID + "/" + strconv.FormatInt(c, 10) + "/" + strconv.FormatInt(n, 10)
	if len(engineID) == 9 && within(engineID, alphanumeric) {
		return derive(seed, alphanumeric, 9)
	}
	if i := strings.LastIndexAny(engineID, "-_"); i >= 0 && i < len(engineID)-1 {
		prefix, part := engineID[:i+1], engineID[i+1:]
		alphabet := alphanumeric
		if within(part, hexDigits) {
			alphabet = hexDigits
		} else if !within(part, alphanumeric) {
			return "call_" + derive(seed, alphanumeric, 24)
		}
		return prefix + derive(seed, alphabet, max(len(part), minRandomPart))
	}
	return "call_" + derive(seed, alphanumeric, 24)
}

// responsesCallID is the call_id of call n of a Responses answer: Mistral's nine
// characters when the engine uses them, else OpenAI's shape, whatever shape the engine gave
// that event.
func responsesCallID(requestID string, n int64, engineID string) string {
	seed := requestID + "/0/" + strconv.FormatInt(n, 10)
	if len(engineID) == 9 && within(engineID, alphanumeric) {
		return derive(seed, alphanumeric, 9)
	}
	return "call_" + derive(seed, alphanumeric, 24)
}

// derive returns n characters of alphabet determined by seed (SHA-256 in counter mode).
func derive(seed, alphabet string, n int) string {
	var b strings.Builder
	b.Grow(n)
	for block := uint32(0); b.Len() < n; block++ {
		var ctr [4]byte
		binary.BigEndian.PutUint32(ctr[:], block)
		sum := sha256.Sum256(append([]byte(seed), ctr[:]...))
		for _, x := range sum {
			if b.Len() == n {
				break
			}
			b.WriteByte(alphabet[int(x)%len(alphabet)])
		}
	}
	return b.String()
}

func within(s, alphabet string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(alphabet, s[i]) < 0 {
			return false
		}
	}
	return s != ""
}

// ToolCallID is the id the gateway gives call (0-based) of choice c of the logical request
// requestID, when the engine named it engineID (only the shape of engineID matters). Whoever
// executes tool calls may recompute it; it is the idempotency key of the call.
func ToolCallID(requestID string, choice, call int, engineID string) string {
	return toolCallID(requestID, int64(choice), int64(call), engineID)
}

// ResponsesCallID is the call_id the gateway gives function call (output index) call of a
// Responses answer of the logical request requestID, when the engine named it engineID.
func ResponsesCallID(requestID string, call int, engineID string) string {
	return responsesCallID(requestID, int64(call), engineID)
}
