package gateway

import "github.com/fencegate/fencegate/internal/request"

// ToolCallID is the id the gateway gives call (0-based) of choice c of the logical request
// requestID, when the engine named it engineID (only the shape of engineID matters). Whoever
// executes tool calls may recompute it; it is the idempotency key of the call
// (docs/design.md §5). The requests rewrite them (request.ToolCallID).
func ToolCallID(requestID string, choice, call int, engineID string) string {
	return request.ToolCallID(requestID, choice, call, engineID)
}

// ResponsesCallID is the call_id the gateway gives function call (output index) call of a
// Responses answer of the logical request requestID, when the engine named it engineID.
func ResponsesCallID(requestID string, call int, engineID string) string {
	return request.ResponsesCallID(requestID, call, engineID)
}
