package failover

import "github.com/fencegate/fencegate/internal/sse"

// Short local names for the event classes the machine reads.
const (
	sseError         = sse.Error
	sseMalformed     = sse.Malformed
	sseDone          = sse.Done
	sseComment       = sse.Comment
	sseFinish        = sse.Finish
	sseOutputBearing = sse.Output | sse.Finish
)
