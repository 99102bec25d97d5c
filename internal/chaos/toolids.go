package chaos

import "github.com/fencegate/fencegate/internal/gateway"

// toolCallID is the id the gateway must give call n of choice c of a logical request whose
// engine makes ids shaped like shape ("" when the checker cannot know it).
func toolCallID(requestID string, c, n int, shape string) string {
	if shape == "" {
		return ""
	}
	return gateway.ToolCallID(requestID, c, n, shape)
}
