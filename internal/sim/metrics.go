package sim

import (
	"maps"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is one replica's Prometheus registry, with vLLM's metric names and
// labels so that whatever scrapes a real vLLM scrapes the sim unchanged.
// Counters are named with their "_total" suffix because that is what
// vLLM's Python client exposes. The registry is per server, never the
// global one, so many replicas can live in one test process.
type metrics struct {
	registry *prometheus.Registry

	prefixQueries    prometheus.Counter // prompt tokens looked up in the prefix cache
	prefixHits       prometheus.Counter // of which found
	promptTokens     prometheus.Counter
	generationTokens prometheus.Counter
	requestSuccess   *prometheus.CounterVec // by finished_reason
}

func newMetrics(cfg Config, sched *scheduler) *metrics {
	labels := prometheus.Labels{"model_name": cfg.Model, "engine": "0"}
	m := &metrics{registry: prometheus.NewRegistry()}
	totalBlocks := float64(cfg.numGPUBlocks())

	gauge := func(name, help string, value func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, value)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.generationTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.requestSuccess = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "vllm:request_success_total",
		Help:        "Count of successfully processed requests.",
		ConstLabels: labels,
	}, []string{"finished_reason"})
	for _, reason := range []string{"stop", "length", "abort"} {
		m.requestSuccess.WithLabelValues(reason) // exposed at 0 from the start, as vLLM does
	}
	// vLLM's info gauge: CacheConfig's fields as labels, plus the engine index.
	infoLabels := prometheus.Labels{"engine": "0"}
	maps.Copy(infoLabels, cfg.CacheConfig)
	cacheInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "vllm:cache_config_info",
		Help:        "Information of the LLMEngine CacheConfig",
		ConstLabels: infoLabels,
	})
	cacheInfo.Set(1)

	m.registry.MustRegister(
		gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func() float64 {
			running, _, _ := sched.load()
			return float64(running)
		}),
		gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func() float64 {
			_, waiting, _ := sched.load()
			return float64(waiting)
		}),
		gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func() float64 {
			_, _, blocks := sched.load()
			return min(1, float64(blocks)/totalBlocks)
		}),
		cacheInfo,
		m.prefixQueries, m.prefixHits, m.promptTokens, m.generationTokens, m.requestSuccess,
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
