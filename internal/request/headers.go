package request

import (
	"net/http"

	"github.com/fencegate/fencegate/internal/agent"
)

// hopHeaders are not forwarded from the client to the engine: hop-by-hop headers, the
// gateway's own credentials and headers the client sets itself. Idempotency-Key and
// X-Idempotency-Key are the gateway's business, not the engine's: an HTTP client that
// honours them (Go's net/http treats such a POST as replayable and silently resends it on
// a new connection when a reused one fails after the request was written) would run an
// attempt that the machine, the journal and max_attempts never see. The attempts' client
// never resends anything (upstream.Client); the headers are stripped all the same, so that
// no client or proxy on the way can.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Host": true,
	"Content-Length": true, "Authorization": true, "Cookie": true, "Accept-Encoding": true,
	"Idempotency-Key": true, "X-Idempotency-Key": true, "X-Request-Id": true, "X-Api-Key": true,
	"X-Fencegate-Agent-Key": true, // a client's guess at the agents' secret goes nowhere
}

// Values of the engine request's own fields, shared by every request: the client writes
// them and never changes them.
var (
	jsonContentType   = []string{"application/json"}
	eventStreamAccept = []string{"text/event-stream"}
)

// Values of a stream's response fields, shared by every stream: the servers write them and
// never change them (each has its length as its capacity, so an append copies).
var (
	eventStreamType  = []string{"text/event-stream"}
	noCache          = []string{"no-cache"}
	accelBufferingNo = []string{"no"}
)

// SetCredentials adds a replica's credentials to a request for it: the engine's API key
// and, when the replica is behind an agent, the agents' secret ("" : none).
func SetCredentials(h http.Header, engineKey, agentKey string) {
	setEngineKey(h, engineKey)
	setAgentKey(h, agentKey)
}

// setEngineKey adds an engine's API key to a request for it. The client's own
// Authorization never reaches an engine (see hopHeaders).
func setEngineKey(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// setAgentKey adds the agents' secret to a request for an agent: with a secret, an agent
// refuses every request without it, data and passthrough included. Engines never get it.
func setAgentKey(h http.Header, secret string) {
	if secret != "" {
		h.Set(agent.HeaderAgentKey, secret)
	}
}
