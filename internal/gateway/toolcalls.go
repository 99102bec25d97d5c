package gateway

import (
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// deterministicToolCallIDs replaces the engine's tool call ids (random, different on every
// attempt) with ids that depend only on the logical request: call_1, call_2, … in order of
// appearance (DESIGN §5). A client that keys its tool executions on
// "<request_id>:<tool_call_id>" then gets the same key whatever replica produced the call.
// Callers pass only chunks the scanner marked sse.ToolCalls. It returns data unchanged (and
// false) when the chunk names no tool call id.
func deterministicToolCallIDs(data []byte, stream bool) ([]byte, bool) {
	field := "message"
	if stream {
		field = "delta"
	}
	out, changed := data, false
	gjson.GetBytes(data, "choices").ForEach(func(ci, choice gjson.Result) bool {
		choice.Get(field + ".tool_calls").ForEach(func(ti, call gjson.Result) bool {
			if !call.Get("id").Exists() {
				return true // a continuation delta: arguments only
			}
			n := ti.Int() + 1
			if idx := call.Get("index"); idx.Exists() {
				n = idx.Int() + 1
			}
			path := "choices." + ci.String() + "." + field + ".tool_calls." + ti.String() + ".id"
			if rewritten, err := sjson.SetBytes(out, path, "call_"+strconv.FormatInt(n, 10)); err == nil {
				out, changed = rewritten, true
			}
			return true
		})
		return true
	})
	return out, changed
}
