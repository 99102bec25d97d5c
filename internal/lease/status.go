package lease

import "fmt"

// Status is the agent's answer about one lease, as sent in a renewal reply.
type Status uint8

const (
	// Unknown: the agent holds no lease for this attempt (it never received
	// the data request, or forgot it long after it ended).
	Unknown Status = iota
	// Renewed: the lease was live and its expiry has been extended.
	Renewed
	// Revoked: the lease was revoked by a cancel, or superseded by a newer
	// epoch of the same logical request. It can never publish again.
	Revoked
	// Expired: the lease ran out before this renewal arrived. It can never
	// be renewed back to life.
	Expired
	// Ended: the attempt's engine request has finished (for any reason).
	Ended
	// StaleEpoch: the agent holds this attempt under a newer epoch; the
	// epoch asked about can never publish again.
	StaleEpoch
)

var statusNames = [...]string{
	Unknown:    "unknown",
	Renewed:    "renewed",
	Revoked:    "revoked",
	Expired:    "expired",
	Ended:      "ended",
	StaleEpoch: "stale_epoch",
}

// String returns the wire name: "renewed", "unknown", "revoked", "expired",
// "ended" or "stale_epoch".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Final reports whether the lease (at the epoch asked about) can never
// publish again, whatever message arrives later: the agent never revives a
// revoked, expired, ended or superseded lease.
func (s Status) Final() bool {
	return s == Revoked || s == Expired || s == Ended || s == StaleEpoch
}

// MarshalText encodes the wire name, so a Status is a JSON string.
func (s Status) MarshalText() ([]byte, error) {
	if int(s) >= len(statusNames) {
		return nil, fmt.Errorf("lease: invalid status %d", uint8(s))
	}
	return []byte(statusNames[s]), nil
}

// UnmarshalText decodes a wire name.
func (s *Status) UnmarshalText(text []byte) error {
	for i, name := range statusNames {
		if string(text) == name {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("lease: unknown status %q", text)
}
