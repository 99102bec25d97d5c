package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"
)

// RequestIDPrefix starts every logical request id.
const RequestIDPrefix = "req_"

// NewRequestID returns a fresh logical request id, req_<ULID>, whose ULID
// carries the time now so ids sort by creation time.
func NewRequestID(now time.Time) string {
	return RequestIDPrefix + ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String()
}

// AttemptID returns the id of attempt n (1-based) of a logical request:
// <request_id>.a<N>.
func AttemptID(requestID string, n int) string {
	return requestID + ".a" + strconv.Itoa(n)
}

// HashBody returns the hex sha256 of a request body, the form Request.BodyHash
// and Claim compare.
func HashBody(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}
