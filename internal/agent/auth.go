package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
)

// control wraps a control endpoint with the agent's access rule: the secret
// when one is configured, otherwise loopback clients only.
func (a *Agent) control(h http.HandlerFunc) http.Handler {
	want := sha256.Sum256([]byte(a.cfg.Secret))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.cfg.Secret != "" {
			// Hashing both sides first makes the comparison constant-time
			// in the secret's length too.
			got := sha256.Sum256([]byte(r.Header.Get(HeaderAgentKey)))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				writeError(w, http.StatusUnauthorized, "invalid_agent_key", "missing or wrong "+HeaderAgentKey)
				return
			}
		} else if !fromLoopback(r) {
			writeError(w, http.StatusForbidden, "control_requires_loopback",
				"this agent has no secret configured, so it accepts control calls from loopback clients only")
			return
		}
		h(w, r)
	})
}

// fromLoopback reports whether the request came from a loopback address.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}
