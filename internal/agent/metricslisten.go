package agent

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// Paths of the metrics listener (Config.MetricsListen). It needs no secret — Prometheus and
// KEDA cannot send the agent's header — so it serves these two reads and nothing else: no
// path of it reaches the engine's API.
const (
	PathOwnMetrics    = "/metrics"        // the agent's own metrics
	PathEngineMetrics = "/engine/metrics" // the engine's /metrics, as the engine wrote them
)

// metricsRoutes is the metrics listener's handler.
func (a *Agent) metricsRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+PathOwnMetrics, a.metrics.handler())
	mux.Handle("GET "+PathEngineMetrics, a.engineMetrics())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "the metrics listener serves GET "+PathOwnMetrics+" and GET "+PathEngineMetrics+" only")
	})
	return mux
}

// engineMetrics proxies a scrape to the engine's own /metrics (vLLM's, SGLang's,
// llama.cpp's), so that its dashboards and autoscalers work although the engine listens on
// loopback behind the agent. The scraper's Accept header and query go with it (content
// negotiation, name[] filters); its body comes back unchanged.
func (a *Agent) engineMetrics() http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = a.engineURLFor(&url.URL{Path: "/metrics", RawQuery: pr.In.URL.RawQuery})
			pr.Out.Host = ""
			pr.Out.Header.Del(HeaderAgentKey)
		},
		Transport: a.client.Transport,
		ErrorLog:  slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			writeError(w, http.StatusBadGateway, "engine_unreachable", "scraping the engine's /metrics: "+err.Error())
		},
	}
}
