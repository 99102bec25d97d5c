package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// requireSecret wraps the agent's whole surface: with a secret configured, every request
// — data, passthrough and control alike — must carry it, or is refused 401. The agent is
// the only way to its engine, so whoever can reach the agent's port could otherwise run
// requests on the engine outside every lease. The one exception is PathHealth, which the
// agent answers itself from a fixed probe of the engine: orchestrator probes (a kubelet's)
// cannot carry a secret, and that answer carries nothing but up or down.
//
// Either of the secrets the agent holds is accepted (the current one and the next, while
// a rotation is under way: docs/design.md §4); they are read again when their file
// changes.
func (a *Agent) requireSecret(h http.Handler) http.Handler {
	if a.secret == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != PathHealth && !a.secret.Accepts(r.Header.Get(HeaderAgentKey)) {
			a.metrics.unauthorized.Inc()
			writeError(w, http.StatusUnauthorized, "invalid_agent_key", "missing or wrong "+HeaderAgentKey)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ReloadSecret reads the secret file again now (SIGHUP; it is also read every
// Config.SecretPoll) and reports whether the secrets changed. An unreadable or invalid
// file is an error, and the secrets read last stay in force.
func (a *Agent) ReloadSecret() (bool, error) {
	changed, err := a.secret.Reload()
	a.metrics.secretReload(changed, err)
	return changed, err
}

// control wraps a control endpoint with the agent's access rule: the secret when one is
// configured (requireSecret checked it), otherwise loopback clients only.
func (a *Agent) control(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.secret == nil && !fromLoopback(r) {
			writeError(w, http.StatusForbidden, "control_requires_loopback",
				"this agent has no secret configured, so it accepts control calls from loopback clients only")
			return
		}
		h(w, r)
	})
}

// healthTimeout bounds the engine probe behind PathHealth.
const healthTimeout = 5 * time.Second

// serveHealth answers PathHealth: 200 when the engine answers its GET /health with 200,
// 503 otherwise. The probe is the agent's own (no header, query or body of the caller
// reaches the engine), so it needs no secret.
func (a *Agent) serveHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.engine.JoinPath("/health").String(), nil)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	resp, err := a.client.Do(req)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"engine_up": false})
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	status := http.StatusOK
	if resp.StatusCode != http.StatusOK {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"engine_up": resp.StatusCode == http.StatusOK, "engine_status": resp.StatusCode})
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
