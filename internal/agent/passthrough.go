package agent

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
)

// newPassthrough returns the reverse proxy for everything the agent does not
// fence: engine paths other than the data endpoints, and data requests that
// carry no lease. Streams are flushed event by event (ReverseProxy does so
// for text/event-stream), and the client's context reaches the engine, so a
// client that leaves cancels its engine request.
func (a *Agent) newPassthrough(t http.RoundTripper) *httputil.ReverseProxy {
	target := a.engine
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The agent's secret is for the agent: the engine (and its logs) never see it.
			pr.Out.Header.Del(HeaderAgentKey)
		},
		Transport: t,
		ErrorLog:  slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left; nobody to answer
			}
			writeError(w, http.StatusBadGateway, "engine_unreachable", "proxying to the engine: "+err.Error())
		},
	}
}
