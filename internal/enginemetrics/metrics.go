// Package enginemetrics reads an inference engine's Prometheus metrics (vLLM's, SGLang's or
// llama.cpp server's names) into the few numbers routing needs: requests running and waiting, KV cache usage,
// and the cache configuration labels that are part of a replica's fingerprint.
//
// It parses text it is given and does no I/O of its own.
package enginemetrics

import (
	"fmt"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Snapshot is an engine's load as its metrics report it.
type Snapshot struct {
	Running int
	Waiting int
	// KVUsage is the fraction of the KV cache in use, 0..1.
	KVUsage float64
	// CacheConfig holds the labels of vllm:cache_config_info (block_size, cache_dtype, ...).
	CacheConfig map[string]string
	// Model is the served model's name (the model_name label of the load metrics).
	Model string
	// Known is false when none of the known metric names was present.
	Known bool
	// Engine names the engine whose metric names were found: "vllm", "sglang", "llamacpp",
	// "tgi" or "".
	Engine string
}

// Names of the metrics read, per engine. A gauge may be exported with several label sets
// (one per model or per rank); the values are summed.
//
// llama.cpp's server (started with --metrics) exports its slots in use as
// llamacpp:requests_processing and the tasks waiting for a free slot as
// llamacpp:requests_deferred, both without labels. Servers before the KV cache was unified
// also exported llamacpp:kv_cache_usage_ratio (0..1); current ones export no KV usage.
//
// TGI exports the requests in its current batch as tgi_batch_current_size and those
// waiting as tgi_queue_size; it exports no KV cache usage.
var (
	runningNames = []string{"vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing", "tgi_batch_current_size"}
	waitingNames = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred", "tgi_queue_size"}
	kvNames      = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "llamacpp:kv_cache_usage_ratio"}
)

// Parse reads Prometheus text exposition format.
func Parse(r io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse engine metrics: %w", err)
	}
	var s Snapshot
	var ok bool
	var v float64
	s.Model = modelName(fams)
	s.Engine = engineOf(fams)
	if v, ok = sum(fams, runningNames); ok {
		s.Running, s.Known = int(v), true
	}
	if v, ok = sum(fams, waitingNames); ok {
		s.Waiting, s.Known = int(v), true
	}
	if v, ok = maxOf(fams, kvNames); ok {
		s.KVUsage, s.Known = v, true
	}
	if f := fams["vllm:cache_config_info"]; f != nil && len(f.GetMetric()) > 0 {
		s.CacheConfig = map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			s.CacheConfig[l.GetName()] = l.GetValue()
		}
	}
	return s, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

func sum(fams map[string]*dto.MetricFamily, names []string) (float64, bool) {
	for _, n := range names {
		if f := fams[n]; f != nil {
			t := 0.0
			for _, m := range f.GetMetric() {
				t += value(m)
			}
			return t, true
		}
	}
	return 0, false
}

func maxOf(fams map[string]*dto.MetricFamily, names []string) (float64, bool) {
	for _, n := range names {
		if f := fams[n]; f != nil {
			t := 0.0
			for _, m := range f.GetMetric() {
				t = max(t, value(m))
			}
			return t, true
		}
	}
	return 0, false
}

// modelName reads the model_name label of the first load metric that has one.
func modelName(fams map[string]*dto.MetricFamily) string {
	for _, names := range [][]string{runningNames, waitingNames} {
		for _, n := range names {
			f := fams[n]
			if f == nil || len(f.GetMetric()) == 0 {
				continue
			}
			for _, l := range f.GetMetric()[0].GetLabel() {
				if l.GetName() == "model_name" {
					return l.GetValue()
				}
			}
		}
	}
	return ""
}

// engineOf tells the engine from its metric names' prefix.
func engineOf(fams map[string]*dto.MetricFamily) string {
	for name := range fams {
		switch {
		case strings.HasPrefix(name, "vllm:"):
			return "vllm"
		case strings.HasPrefix(name, "sglang:"):
			return "sglang"
		case strings.HasPrefix(name, "llamacpp:"):
			return "llamacpp"
		case strings.HasPrefix(name, "tgi_"):
			return "tgi"
		}
	}
	return ""
}
