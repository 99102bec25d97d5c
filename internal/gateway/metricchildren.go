package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
)

// metricChildren keeps the children of the metric vectors every request updates, by their
// label values. A vector's WithLabelValues checks each value's UTF-8, hashes them and
// looks the child up under a lock, about a thousand instructions a call and four calls a
// request; a child found here is one lock-free lookup. The vectors never delete a child,
// so a child kept here is always the one the vector exports.
type metricChildren struct {
	ttft      sync.Map // model → prometheus.Observer
	delivered sync.Map // model → prometheus.Counter
	requests  sync.Map // requestLabels → prometheus.Counter
	attempts  sync.Map // attemptLabels → prometheus.Counter
}

type requestLabels struct {
	model   string
	api     openai.Endpoint
	outcome failover.Outcome
}

type attemptLabels struct{ model, replica, end string }

func (c *metricChildren) ttftOf(v *prometheus.HistogramVec, model string) prometheus.Observer {
	if o, ok := c.ttft.Load(model); ok {
		return o.(prometheus.Observer)
	}
	o, _ := c.ttft.LoadOrStore(model, v.WithLabelValues(model))
	return o.(prometheus.Observer)
}

func (c *metricChildren) deliveredOf(v *prometheus.CounterVec, model string) prometheus.Counter {
	if o, ok := c.delivered.Load(model); ok {
		return o.(prometheus.Counter)
	}
	o, _ := c.delivered.LoadOrStore(model, v.WithLabelValues(model))
	return o.(prometheus.Counter)
}

func (c *metricChildren) requestsOf(v *prometheus.CounterVec, l requestLabels) prometheus.Counter {
	if o, ok := c.requests.Load(l); ok {
		return o.(prometheus.Counter)
	}
	o, _ := c.requests.LoadOrStore(l, v.WithLabelValues(l.model, l.api.String(), l.outcome.String()))
	return o.(prometheus.Counter)
}

func (c *metricChildren) attemptsOf(v *prometheus.CounterVec, l attemptLabels) prometheus.Counter {
	if o, ok := c.attempts.Load(l); ok {
		return o.(prometheus.Counter)
	}
	o, _ := c.attempts.LoadOrStore(l, v.WithLabelValues(l.model, l.replica, l.end))
	return o.(prometheus.Counter)
}
