package lease

import "strings"

// RequestOf returns the logical request id of an attempt id: the part before
// the last ".a" ("req_01J….a2" → "req_01J…"). An id without ".a" is its own
// logical request, so an unusual id still gets epoch checking of its own.
func RequestOf(attempt string) string {
	if i := strings.LastIndex(attempt, ".a"); i > 0 {
		return attempt[:i]
	}
	return attempt
}
