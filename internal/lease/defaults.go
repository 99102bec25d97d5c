package lease

import "time"

// Recommended lease timings. The gateway may configure others; these are the
// values it uses when configuration is silent.
const (
	// DefaultTTL is how long a lease lives without a renewal. It bounds how
	// long a replica the gateway can no longer reach keeps publishing, and so
	// how long an uncertain attempt blocks its rerun: short enough that a
	// client waiting on a rerun barely notices, long enough to survive two
	// lost renewals on a congested network.
	DefaultTTL = 3 * time.Second

	// DefaultRenewEvery is the interval of the batched renewal. Three renewals
	// per TTL mean one lost renewal never expires a healthy lease.
	DefaultRenewEvery = time.Second

	// DefaultDriftMargin is added to every gateway-side expiry. Clock-rate
	// drift between two hosts over one TTL is a few microseconds; the margin
	// mostly covers the agent's expiry timer firing late (scheduling delay,
	// a garbage-collection pause) before it aborts a silent engine request.
	DefaultDriftMargin = 500 * time.Millisecond

	// DefaultHeartbeatTimeout is how long the gateway waits without any
	// renewal ack before it judges the agent unreachable: two missed
	// renewals. One miss is ordinary jitter; two in a row are not.
	DefaultHeartbeatTimeout = 2 * DefaultRenewEvery
)
