package gateway

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
)

// A child found through the cache is the vector's own child for those label values:
// what is counted through it is what the vector exports, label set by label set.
func TestMetricChildrenAreTheVectorsChildren(t *testing.T) {
	var c metricChildren
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "r"}, []string{"model", "api", "outcome"})
	atts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "a"}, []string{"model", "replica", "end"})
	deliv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "d"}, []string{"model"})
	ttft := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "t"}, []string{"model"})
	for i := range 3 {
		c.requestsOf(reqs, requestLabels{"m1", openai.Chat, failover.Completed}).Inc()
		c.attemptsOf(atts, attemptLabels{"m1", "r1", "completed"}).Inc()
		c.deliveredOf(deliv, "m1").Add(16)
		c.ttftOf(ttft, "m1").Observe(0.1)
		if i == 0 {
			c.requestsOf(reqs, requestLabels{"m1", openai.Messages, failover.Completed}).Inc()
			c.requestsOf(reqs, requestLabels{"m2", openai.Chat, failover.Interrupted}).Inc()
			c.attemptsOf(atts, attemptLabels{"m1", "r2", "completed"}).Inc()
			c.deliveredOf(deliv, "m2").Add(1)
		}
	}
	for _, x := range []struct {
		got  prometheus.Counter
		want float64
	}{
		{reqs.WithLabelValues("m1", openai.Chat.String(), failover.Completed.String()), 3},
		{reqs.WithLabelValues("m1", openai.Messages.String(), failover.Completed.String()), 1},
		{reqs.WithLabelValues("m2", openai.Chat.String(), failover.Interrupted.String()), 1},
		{atts.WithLabelValues("m1", "r1", "completed"), 3},
		{atts.WithLabelValues("m1", "r2", "completed"), 1},
		{deliv.WithLabelValues("m1"), 48},
		{deliv.WithLabelValues("m2"), 1},
	} {
		var m dto.Metric
		if err := x.got.Write(&m); err != nil {
			t.Fatal(err)
		}
		if v := m.GetCounter().GetValue(); v != x.want {
			t.Errorf("%v: %v, want %v", m.GetLabel(), v, x.want)
		}
	}
	if n := collected(reqs); n != 3 {
		t.Errorf("request label sets: %d, want 3", n)
	}
	var m dto.Metric
	if err := ttft.WithLabelValues("m1").(prometheus.Histogram).Write(&m); err != nil || m.GetHistogram().GetSampleCount() != 3 || collected(ttft) != 1 {
		t.Errorf("ttft: %v samples in %d label sets (%v), want 3 in 1", m.GetHistogram().GetSampleCount(), collected(ttft), err)
	}
}

// collected is the number of label sets c exports.
func collected(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

func BenchmarkRequestCounter(b *testing.B) {
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "r"}, []string{"model", "api", "outcome"})
	b.Run("WithLabelValues", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reqs.WithLabelValues("sim-model", openai.Chat.String(), failover.Completed.String()).Inc()
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c metricChildren
		b.ReportAllocs()
		for b.Loop() {
			c.requestsOf(reqs, requestLabels{"sim-model", openai.Chat, failover.Completed}).Inc()
		}
	})
}
