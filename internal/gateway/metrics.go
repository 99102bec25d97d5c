package gateway

import (
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/kvevents"
	"github.com/fencegate/fencegate/internal/openai"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the gateway's Prometheus metrics. Every update is per request or per attempt,
// never per token: the token path stays free of them.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	attempts     *prometheus.CounterVec
	reruns       *prometheus.CounterVec
	shed         *prometheus.CounterVec
	softTimeouts *prometheus.CounterVec
	ttft         *prometheus.HistogramVec
	delivered    *prometheus.CounterVec
	limited      *prometheus.CounterVec
	// ejections counts replicas taken out of rotation after consecutive failed attempts;
	// ejectionsHeld the failures that would have ejected one but for it being the last
	// healthy replica of its pool.
	ejections     *prometheus.CounterVec
	ejectionsHeld *prometheus.CounterVec
	// queueLen, queueWait and queueEnded are the pools' queues (queue.go), by class.
	queueLen   *prometheus.GaugeVec
	queueWait  *prometheus.HistogramVec
	queueEnded *prometheus.CounterVec
	// children are the per-request vectors' children, found without the vectors' lookups.
	children metricChildren
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_requests_total",
		Help: "Logical requests by API (chat, completions, messages, responses, embeddings) and how they ended (completed, interrupted, failed, cancelled)."}, []string{"model", "api", "outcome"})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_attempts_total",
		Help: "Attempts by replica and how they ended (completed, dead, uncertain, overloaded, rejected, cancelled)."}, []string{"model", "replica", "end"})
	m.reruns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_reruns_total",
		Help: "Reruns of a request on another replica before the delivery boundary, by why the previous attempt ended (connection_refused, connection_reset, engine_status_503, agent_unreachable, ...)."}, []string{"model", "reason"})
	m.shed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_shed_total",
		Help: "Requests answered 429 because every replica was at its load limit."}, []string{"model"})
	m.softTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_slow_first_token_total",
		Help: "Streams whose first token took longer than the keepalive period (a soft timeout: never a failover)."}, []string{"model"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fencegate_time_to_first_token_seconds",
		Help:    "From request accepted to the first output-bearing write.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"model"})
	m.delivered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_delivered_output_tokens_total",
		Help: "Output tokens written to clients: counted from the engine's per-chunk usage where it reports it, else one per output-bearing choice delta."}, []string{"model"})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_limited_total",
		Help: "Requests refused with 429 for a key's limit (requests or tokens per minute, concurrency)."}, []string{"key_id", "limit"})
	m.ejections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_replica_ejections_total",
		Help: "Replicas ejected (out of rotation for a while, however their health probe answers) after health.eject_after consecutive failed attempts."}, []string{"model", "replica"})
	m.ejectionsHeld = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_replica_ejections_held_total",
		Help: "Failed attempts that reached health.eject_after on a replica that was not ejected, because no other replica of its pool was healthy."}, []string{"model", "replica"})
	m.queueLen = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fencegate_queue_length",
		Help: "Requests waiting in the model's queue for a slot (every replica at its capacity), by priority class."}, []string{"model", "priority"})
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fencegate_queue_wait_seconds",
		Help:    "How long a request waited in the model's queue before a slot was granted to it, by priority class.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"model", "priority"})
	m.queueEnded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_queue_ended_total",
		Help: "Waits in the model's queue by how they ended: dequeued (a slot was granted), expired (queue.max_wait: 503 queue_timeout), shed (the queue was full: 429 queue_full), left (the request ended while it waited)."},
		[]string{"model", "priority", "end"})
	backendUp := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fencegate_limits_backend_up",
		Help: "1 when the per-key limits are counted where limits.backend says (always with local); 0 while its Redis is unreachable."},
		func() float64 {
			if s.limiter.Up() {
				return 1
			}
			return 0
		})
	storeUp := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fencegate_store_connected",
		Help: "1 while the store (the journal, idempotency keys, stored API keys) answers; 0 before it was reached and while its calls fail."},
		func() float64 {
			if s.storeAnswers() {
				return 1
			}
			return 0
		})
	m.reg.MustRegister(m.requests, m.attempts, m.reruns, m.shed, m.softTimeouts, m.ttft, m.delivered, m.limited,
		m.ejections, m.ejectionsHeld, m.queueLen, m.queueWait, m.queueEnded, backendUp, storeUp,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), &poolCollector{s: s})
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// poolCollector reports replica state, load and the retry budget at scrape time.
type poolCollector struct{ s *Server }

var (
	replicaStateDesc = prometheus.NewDesc("fencegate_replica_state", "1 for the replica's current state.",
		[]string{"model", "replica", "state"}, nil)
	replicaOutstandingDesc = prometheus.NewDesc("fencegate_replica_outstanding", "Attempts this gateway has in flight on the replica.",
		[]string{"model", "replica"}, nil)
	replicaWaitingDesc = prometheus.NewDesc("fencegate_replica_engine_waiting", "Requests waiting in the engine, as it last reported.",
		[]string{"model", "replica"}, nil)
	replicaPrefixDesc = prometheus.NewDesc("fencegate_replica_prefix_blocks",
		"Prompt blocks (256 bytes of request JSON each) the cache-aware policy records as sent to the replica, and the most it keeps (bounded by the engine's KV cache).",
		[]string{"model", "replica", "of"}, nil)
	replicaKVEventsDesc = prometheus.NewDesc("fencegate_replica_kv_events",
		"1 for the state of the replica's KV events (live: its prompt record is sized and aged by its engine's cache; degraded: events lost, late or the subscription down, the record sized as without them; off: none configured), 0 for the others.",
		[]string{"model", "replica", "state"}, nil)
	replicaKVBlocksDesc = prometheus.NewDesc("fencegate_replica_kv_cache_blocks",
		"Blocks the replica's engine holds in its prefix cache, as its KV events since the last resync say.",
		[]string{"model", "replica"}, nil)
	budgetDesc = prometheus.NewDesc("fencegate_retry_budget_tokens", "Reruns the pool's retry budget allows now.",
		[]string{"model"}, nil)
	journalPendingDesc = prometheus.NewDesc("fencegate_journal_pending", "Journal mutations waiting to be written.", nil, nil)
	availableDesc      = prometheus.NewDesc("fencegate_model_available_replicas",
		"Replicas of the model that can take a request now (0: its requests get 503 no_healthy_replica; the gateway stays ready).",
		[]string{"model"}, nil)
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicaStateDesc
	ch <- replicaOutstandingDesc
	ch <- replicaWaitingDesc
	ch <- replicaPrefixDesc
	ch <- replicaKVEventsDesc
	ch <- replicaKVBlocksDesc
	ch <- budgetDesc
	ch <- journalPendingDesc
	ch <- availableDesc
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.now()
	for name, p := range c.s.current().pools {
		p.mu.Lock()
		available := 0
		for _, r := range p.b.Replicas {
			st := r.StateAt(now, p.b.Limits)
			if st == balance.Healthy {
				available++
			}
			ch <- prometheus.MustNewConstMetric(replicaStateDesc, prometheus.GaugeValue, 1, name, r.Name, st.String())
			ch <- prometheus.MustNewConstMetric(replicaOutstandingDesc, prometheus.GaugeValue, float64(r.Outstanding), name, r.Name)
			ch <- prometheus.MustNewConstMetric(replicaWaitingDesc, prometheus.GaugeValue, float64(r.Load.Waiting), name, r.Name)
			if p.b.Limits.CacheAware && r.Prefix != nil {
				ch <- prometheus.MustNewConstMetric(replicaPrefixDesc, prometheus.GaugeValue, float64(r.Prefix.Len()), name, r.Name, "recorded")
				ch <- prometheus.MustNewConstMetric(replicaPrefixDesc, prometheus.GaugeValue, float64(r.Prefix.Capacity), name, r.Name, "capacity")
			}
			kst, _ := p.kvState(r.Name)
			for _, st := range kvevents.States {
				v := 0.0
				if st == kst {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(replicaKVEventsDesc, prometheus.GaugeValue, v, name, r.Name, st.String())
			}
			if m := p.members[r.Name]; m != nil && m.kv != nil {
				ch <- prometheus.MustNewConstMetric(replicaKVBlocksDesc, prometheus.GaugeValue, float64(m.kv.tracker.Resident()), name, r.Name)
			}
		}
		ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, p.budget.Tokens(now), name)
		ch <- prometheus.MustNewConstMetric(availableDesc, prometheus.GaugeValue, float64(available), name)
		p.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(journalPendingDesc, prometheus.GaugeValue, float64(c.s.journal.Stats().Pending))
}

// The methods below are what requests count (request.Metrics).

// Rerun counts a rerun, by why the attempt before it ended.
func (m *metrics) Rerun(model string, after failover.EndReason) {
	m.reruns.WithLabelValues(model, string(after)).Inc()
}

// Shed counts a request no replica could take, all being at their load limit.
func (m *metrics) Shed(model string) { m.shed.WithLabelValues(model).Inc() }

// SlowFirstToken counts a stream whose first token took longer than the keepalive.
func (m *metrics) SlowFirstToken(model string) { m.softTimeouts.WithLabelValues(model).Inc() }

// FirstDelta observes a request's time to first token.
func (m *metrics) FirstDelta(model string, ttft time.Duration) {
	m.children.ttftOf(m.ttft, model).Observe(ttft.Seconds())
}

// AttemptEnded counts an attempt by replica and how it ended.
func (m *metrics) AttemptEnded(model, replica, end string) {
	m.children.attemptsOf(m.attempts, attemptLabels{model, replica, end}).Inc()
}

// RequestEnded counts a request by API and outcome, and the output tokens it delivered.
func (m *metrics) RequestEnded(model string, api openai.Endpoint, o failover.Outcome, delivered int) {
	m.children.requestsOf(m.requests, requestLabels{model, api, o}).Inc()
	m.children.deliveredOf(m.delivered, model).Add(float64(delivered))
}
