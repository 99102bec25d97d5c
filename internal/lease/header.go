package lease

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxTTL is the longest lease the agent accepts. A lease is meant to be
// renewed every second or so; a much longer one would only postpone the
// moment a lost replica can be proven silent.
const MaxTTL = 10 * time.Minute

// FormatHeader returns the value of the X-Fencegate-Lease header:
// "epoch=<uint64>;ttl_ms=<int>". The TTL is rounded down to whole
// milliseconds.
func FormatHeader(epoch uint64, ttl time.Duration) string {
	return "epoch=" + strconv.FormatUint(epoch, 10) + ";ttl_ms=" + strconv.FormatInt(ttl.Milliseconds(), 10)
}

// ParseHeader parses an X-Fencegate-Lease value written by FormatHeader.
// Both fields are required, in any order, separated by ';' with optional
// spaces; unknown fields are ignored so the header can grow. The epoch must be
// positive and the TTL in (0, MaxTTL].
func ParseHeader(v string) (epoch uint64, ttl time.Duration, err error) {
	var haveEpoch, haveTTL bool
	for field := range strings.SplitSeq(v, ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			if strings.TrimSpace(field) == "" {
				continue
			}
			return 0, 0, fmt.Errorf("lease header %q: field %q is not name=value", v, field)
		}
		switch strings.TrimSpace(name) {
		case "epoch":
			epoch, err = strconv.ParseUint(strings.TrimSpace(value), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("lease header %q: epoch: %w", v, err)
			}
			haveEpoch = true
		case "ttl_ms":
			ms, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("lease header %q: ttl_ms: %w", v, err)
			}
			if ms <= 0 || ms > MaxTTL.Milliseconds() {
				return 0, 0, fmt.Errorf("lease header %q: ttl_ms must be in 1..%d", v, MaxTTL.Milliseconds())
			}
			ttl = time.Duration(ms) * time.Millisecond
			haveTTL = true
		}
	}
	switch {
	case !haveEpoch:
		return 0, 0, fmt.Errorf("lease header %q: %w", v, errors.New("missing epoch"))
	case !haveTTL:
		return 0, 0, fmt.Errorf("lease header %q: %w", v, errors.New("missing ttl_ms"))
	case epoch == 0:
		return 0, 0, fmt.Errorf("lease header %q: %w", v, errors.New("epoch must be positive"))
	}
	return epoch, ttl, nil
}
