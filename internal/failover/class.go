package failover

// FailureClass says why an attempt ended without completing (docs/design.md §3). The four cases are
// never mixed up: they lead to different decisions.
type FailureClass uint8

const (
	// Dead: connection refused, reset or closed mid-stream, engine 5xx, or the replica is
	// reported gone. The attempt is fenced by its death.
	Dead FailureClass = iota + 1
	// Uncertain: the connection is open but silent past a hard timeout, or an agent is
	// unreachable. The attempt may still be decoding somewhere.
	Uncertain
	// Overloaded: an explicit engine rejection (429, 503 busy) before the request started.
	// Never a soft timeout.
	Overloaded
	// Rejected: the engine refused the input itself (4xx other than 429). Rerunning the same
	// input elsewhere cannot help; the engine's error goes to the client.
	Rejected
)

func (c FailureClass) String() string {
	switch c {
	case Dead:
		return "dead"
	case Uncertain:
		return "uncertain"
	case Overloaded:
		return "overloaded"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}
