package gateway

import "github.com/fencegate/fencegate/internal/config"

// traceModeFor is the trace mode of a request of key k: the key's own, else the gateway's
// (the request keeps its trace document, request.TraceDocumentKind).
func traceModeFor(cfg *config.Config, k apiKey) config.TraceMode {
	if k.traces != "" {
		return k.traces
	}
	return cfg.Traces.Mode
}
