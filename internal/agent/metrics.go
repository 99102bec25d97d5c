package agent

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// agentMetrics are the agent's own Prometheus metrics, in a registry of its own (several
// agents may run in one process). Every update is per request or per attempt, never per
// event: the relay stays free of them.
type agentMetrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	granted      prometheus.Counter
	staleEpochs  prometheus.Counter
	ended        *prometheus.CounterVec
	renewals     prometheus.Counter
	cancels      prometheus.Counter
	sglangAborts *prometheus.CounterVec
	scrapeErrors prometheus.Counter
	unauthorized prometheus.Counter
	reloads      *prometheus.CounterVec
	// fenced, unfenced and endedBy are the children every attempt counts, resolved once:
	// a vector's WithLabelValues checks, hashes and looks its values up under a lock on
	// every call. The vectors never delete a child.
	fenced, unfenced prometheus.Counter
	endedBy          map[string]prometheus.Counter
}

// Kinds of requests the agent serves (fencegate_agent_requests_total).
const (
	kindFenced      = "fenced"      // a data request with a lease
	kindUnfenced    = "unfenced"    // a data request without one, passed through
	kindPassthrough = "passthrough" // any other engine path
	kindControl     = "control"     // renew, cancel, attempts
)

func newAgentMetrics(a *Agent) *agentMetrics {
	m := &agentMetrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_agent_requests_total",
		Help: "Requests the agent served, by kind: fenced (a data request with a lease), unfenced (a data request without one), passthrough (other engine paths), control (renew, cancel, attempts)."},
		[]string{"kind"})
	m.granted = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_leases_granted_total",
		Help: "Leases started: fenced attempts accepted."})
	m.staleEpochs = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_stale_epochs_total",
		Help: "Fenced requests refused (409 stale_lease_epoch) because a newer epoch of their attempt was seen: a late request of a fenced attempt."})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_agent_attempts_ended_total",
		Help: "Fenced attempts ended, by reason: finished, or an abort (lease_expired, revoked, superseded, client_gone, agent_closed) or a failure (engine_error, bad_request)."},
		[]string{"reason"})
	m.renewals = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_renewals_total",
		Help: "Batched lease renewals (gateway heartbeats) answered."})
	m.cancels = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_cancels_total",
		Help: "Cancels (lease revocations) received."})
	m.sglangAborts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_agent_sglang_aborts_total",
		Help: "SGLang /abort_request calls, by result (ok, failed)."}, []string{"result"})
	m.scrapeErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_engine_scrape_errors_total",
		Help: "Scrapes of the engine's /metrics that failed (the engine unreachable, an error status, or unparsable)."})
	m.unauthorized = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_unauthorized_total",
		Help: "Requests refused 401 for a missing or wrong X-Fencegate-Agent-Key (during a secret rotation, a sign that a gateway sends a secret the agent does not hold yet)."})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_agent_secret_reloads_total",
		Help: "Reads of the secret file that changed the secrets (changed) or failed (error; the secrets read last stay)."}, []string{"result"})
	m.fenced, m.unfenced = m.requests.WithLabelValues(kindFenced), m.requests.WithLabelValues(kindUnfenced)
	m.endedBy = make(map[string]prometheus.Counter)
	for _, r := range []string{EndFinished, EndLeaseExpired, EndRevoked, EndSuperseded, EndEngineError,
		EndClientGone, EndBadRequest, EndAgentClosed} {
		m.endedBy[r] = m.ended.WithLabelValues(r)
	}
	m.reg.MustRegister(m.requests, m.granted, m.staleEpochs, m.ended, m.renewals, m.cancels, m.sglangAborts,
		m.scrapeErrors, m.unauthorized, m.reloads, &agentCollector{a: a},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// secretReload counts a read of the secret file.
func (m *agentMetrics) secretReload(changed bool, err error) {
	switch {
	case err != nil:
		m.reloads.WithLabelValues("error").Inc()
	case changed:
		m.reloads.WithLabelValues("changed").Inc()
	}
}

func (m *agentMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// attemptEnded counts an attempt by why it ended.
func (m *agentMetrics) attemptEnded(reason string) {
	if c, ok := m.endedBy[reason]; ok {
		c.Inc()
		return
	}
	m.ended.WithLabelValues(reason).Inc()
}

// counted counts each request to h as kind.
func (m *agentMetrics) counted(kind string, h http.Handler) http.Handler {
	c := m.requests.WithLabelValues(kind)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Inc()
		h.ServeHTTP(w, r)
	})
}

// agentCollector reports what the agent holds at scrape time.
type agentCollector struct{ a *Agent }

var (
	leasesActiveDesc = prometheus.NewDesc("fencegate_agent_leases_active", "Fenced attempts whose engine request is running.", nil, nil)
	engineUpDesc     = prometheus.NewDesc("fencegate_agent_engine_up",
		"1 when the agent's last scrape of the engine's /metrics got an answer below 500; 0 when the engine is unreachable or failing.", nil, nil)
	engineScrapedDesc = prometheus.NewDesc("fencegate_agent_engine_last_scrape_timestamp_seconds",
		"When the agent last scraped the engine's /metrics (Unix time).", nil, nil)
	secretsDesc = prometheus.NewDesc("fencegate_agent_secrets",
		"Secrets the agent accepts: 0 (none: control calls from loopback only), 1, or 2 while a rotation is under way.", nil, nil)
)

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leasesActiveDesc
	ch <- engineUpDesc
	ch <- engineScrapedDesc
	ch <- secretsDesc
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	a.mu.Lock()
	active := len(a.live)
	a.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(leasesActiveDesc, prometheus.GaugeValue, float64(active))
	up, scraped := 0.0, 0.0
	if res := a.load.Load(); res != nil {
		if res.load.Up {
			up = 1
		}
		scraped = float64(res.load.ScrapeMs) / 1000
	}
	ch <- prometheus.MustNewConstMetric(engineUpDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(engineScrapedDesc, prometheus.GaugeValue, scraped)
	secrets := 0
	if s := a.secret.Secrets(); s != nil {
		secrets = s.Len()
	}
	ch <- prometheus.MustNewConstMetric(secretsDesc, prometheus.GaugeValue, float64(secrets))
}
