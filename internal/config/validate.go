package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of the failover policy (docs/design.md §3) and of health tracking.
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultMaxAttempts       = 2
	DefaultIdleTimeout       = 30 * time.Second
	DefaultFirstTokenTimeout = 120 * time.Second
	DefaultKeepalive         = 15 * time.Second
	DefaultNonStreamTimeout  = 10 * time.Minute
	DefaultProbeEvery        = 5 * time.Second
	DefaultProbeTimeout      = 2 * time.Second
	DefaultDeadCooldown      = 10 * time.Second
	DefaultEjectAfter        = 5
	DefaultDialTimeout       = 2 * time.Second
	DefaultMaxBodyBytes      = 32 << 20
	DefaultBudgetRatio       = 0.2
	DefaultBudgetPerSecond   = 3.0
	DefaultBudgetBurst       = 10.0
	DefaultStore             = "sqlite:fencegate.db"
	DefaultRetention         = 24 * time.Hour
	DefaultOwnerLease        = 10 * time.Second
	DefaultMaxReplayBytes    = 8 << 20
	DefaultScrapeEvery       = time.Second
	DefaultMaxQueue          = 32
	DefaultQueueMaxWait      = 30 * time.Second
	DefaultQueueMaxLen       = 1024
	DefaultAffinityPrefix    = 512
	DefaultAffinityBound     = 1.5
	DefaultAffinitySlack     = 6
	DefaultPrefillRate       = 10000.0
	DefaultLeaseTTL          = 3 * time.Second
	DefaultRenewEvery        = time.Second
	DefaultDriftMargin       = 500 * time.Millisecond
	DefaultClientWrite       = 30 * time.Second
	DefaultMaxHeldBytes      = 1 << 20
	DefaultDrainGrace        = 25 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyReadTimeout   = 60 * time.Second
	DefaultServerIdleTimeout = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnections    = 10000
	DefaultKeyStoreRefresh   = 2 * time.Second
	DefaultLimitsKeyPrefix   = "fencegate:limits:"
)

// Values of limits.backend and limits.on_backend_error.
const (
	LimitsLocal        = "local"
	LimitsFailOpen     = "open"
	LimitsFailClosed   = "closed"
	limitsRedisScheme  = "redis://"
	limitsRedissScheme = "rediss://"
)

// EngineKinds are the values of a replica's engine field.
var EngineKinds = []string{"vllm", "sglang", "llamacpp", "tgi", "generic"}

// Validate fills defaults and checks every field; the error names the field at fault.
func (c *Config) Validate() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %q is not host:port: %w", c.Listen, err)
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	if err := c.Server.validate(); err != nil {
		return err
	}
	if len(c.Models) == 0 {
		return fmt.Errorf("models: at least one model is required")
	}
	seenModel := map[string]bool{}
	for i := range c.Models {
		if err := c.Models[i].validate(fmt.Sprintf("models[%d]", i)); err != nil {
			return err
		}
		if seenModel[c.Models[i].Name] {
			return fmt.Errorf("models[%d].name: %q is listed twice", i, c.Models[i].Name)
		}
		seenModel[c.Models[i].Name] = true
	}
	if err := c.Policy.validate(); err != nil {
		return err
	}
	if err := c.Health.validate(); err != nil {
		return err
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if err := c.Auth.validate(); err != nil {
		return err
	}
	if err := c.validateAdminListen(); err != nil {
		return err
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if !strings.HasPrefix(c.Store, "sqlite:") && !strings.HasPrefix(c.Store, "postgres://") &&
		!strings.HasPrefix(c.Store, "postgresql://") && c.Store != "memory:" {
		return fmt.Errorf("store: %q is not sqlite:PATH, postgres://... or memory:", c.Store)
	}
	i := &c.Idempotency
	if err := defaultPositive(&i.Retention, DefaultRetention, "idempotency.retention"); err != nil {
		return err
	}
	if err := defaultPositive(&i.OwnerLease, DefaultOwnerLease, "idempotency.owner_lease"); err != nil {
		return err
	}
	if i.OwnerLease.D() < 100*time.Millisecond {
		return fmt.Errorf("idempotency.owner_lease: %s is below the minimum of 100ms", i.OwnerLease.D())
	}
	if i.MaxReplayBytes == 0 {
		i.MaxReplayBytes = DefaultMaxReplayBytes
	}
	if i.MaxReplayBytes < 0 {
		return fmt.Errorf("idempotency.max_replay_bytes: %d must be positive", i.MaxReplayBytes)
	}
	if err := c.Traces.validate(); err != nil {
		return err
	}
	if err := defaultPositive(&c.Shutdown.DrainGrace, DefaultDrainGrace, "shutdown.drain_grace"); err != nil {
		return err
	}
	return c.Leases.validate()
}

func (l *Leases) validate() error {
	if err := defaultPositive(&l.TTL, DefaultLeaseTTL, "leases.ttl"); err != nil {
		return err
	}
	if err := defaultPositive(&l.RenewEvery, DefaultRenewEvery, "leases.renew_every"); err != nil {
		return err
	}
	if err := defaultPositive(&l.DriftMargin, DefaultDriftMargin, "leases.drift_margin"); err != nil {
		return err
	}
	if err := defaultPositive(&l.HeartbeatTimeout, 2*l.RenewEvery.D(), "leases.heartbeat_timeout"); err != nil {
		return err
	}
	if l.RenewEvery.D()*2 > l.TTL.D() {
		return fmt.Errorf("leases.renew_every: %s must be at most half of leases.ttl (%s), or one lost renewal expires a healthy lease", l.RenewEvery.D(), l.TTL.D())
	}
	if l.HeartbeatTimeout.D() < l.RenewEvery.D() {
		return fmt.Errorf("leases.heartbeat_timeout: %s must be at least leases.renew_every (%s)", l.HeartbeatTimeout.D(), l.RenewEvery.D())
	}
	return nil
}

func (m *Model) validate(field string) error {
	if m.Name == "" {
		return fmt.Errorf("%s.name: required", field)
	}
	if d := m.ReplicasFrom; d != nil {
		if err := d.validate(field + ".replicas_from"); err != nil {
			return err
		}
	} else if len(m.Replicas) == 0 {
		return fmt.Errorf("%s.replicas: at least one replica is required (or replicas_from)", field)
	}
	if m.APIKeyFile != "" && m.APIKeyEnv != "" {
		return fmt.Errorf("%s: api_key_file and api_key_env are both set; choose one", field)
	}
	seen := map[string]bool{}
	for j := range m.Replicas {
		r := &m.Replicas[j]
		f := fmt.Sprintf("%s.replicas[%d]", field, j)
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.url: %q is not an http(s) URL with a host", f, r.URL)
		}
		if u.Path != "" && u.Path != "/" {
			return fmt.Errorf("%s.url: %q must be a base URL without a path (the gateway adds /v1/...)", f, r.URL)
		}
		r.URL = u.Scheme + "://" + u.Host
		if r.Name == "" {
			r.Name = u.Host
		}
		if seen[r.Name] {
			return fmt.Errorf("%s.name: %q is used twice in this pool", f, r.Name)
		}
		seen[r.Name] = true
		if r.Priority < 0 {
			return fmt.Errorf("%s.priority: %d must be >= 0", f, r.Priority)
		}
		if r.APIKeyFile != "" && r.APIKeyEnv != "" {
			return fmt.Errorf("%s: api_key_file and api_key_env are both set; choose one", f)
		}
		if r.Engine != "" && !slices.Contains(EngineKinds, r.Engine) {
			return fmt.Errorf("%s.engine: %q is not one of %s", f, r.Engine, strings.Join(EngineKinds, ", "))
		}
		for k := range r.Fingerprint {
			if !slices.Contains(FingerprintKeys, k) {
				return fmt.Errorf("%s.fingerprint.%s: unknown key (known: %s)", f, k, strings.Join(FingerprintKeys, ", "))
			}
		}
	}
	domains := map[string]int{}
	for j, r := range m.Replicas {
		if r.KVCacheDomain == "" {
			continue
		}
		first, ok := domains[r.KVCacheDomain]
		if !ok {
			domains[r.KVCacheDomain] = j
			continue
		}
		if !maps.Equal(r.Fingerprint, m.Replicas[first].Fingerprint) {
			return fmt.Errorf("%s.replicas[%d].fingerprint: differs from replicas[%d] in kv_cache_domain %q; replicas sharing a KV cache must have identical fingerprints",
				field, j, first, r.KVCacheDomain)
		}
	}
	if m.MaxOutstanding < 0 {
		return fmt.Errorf("%s.max_outstanding: %d must be >= 0", field, m.MaxOutstanding)
	}
	switch {
	case m.MaxQueue == 0:
		m.MaxQueue = DefaultMaxQueue
	case m.MaxQueue < -1:
		return fmt.Errorf("%s.max_queue: %d must be positive, or -1 to disable", field, m.MaxQueue)
	}
	switch {
	case m.Queue.MaxLen == 0:
		m.Queue.MaxLen = DefaultQueueMaxLen
	case m.Queue.MaxLen < -1:
		return fmt.Errorf("%s.queue.max_len: %d must be positive, or -1 for no queue", field, m.Queue.MaxLen)
	}
	if err := defaultPositive(&m.Queue.MaxWait, DefaultQueueMaxWait, field+".queue.max_wait"); err != nil {
		return err
	}
	switch {
	case m.Affinity.PrefixBytes == 0:
		m.Affinity.PrefixBytes = DefaultAffinityPrefix
	case m.Affinity.PrefixBytes < -1:
		return fmt.Errorf("%s.affinity.prefix_bytes: %d must be positive, or -1 to disable", field, m.Affinity.PrefixBytes)
	}
	if m.Affinity.LoadBound == 0 {
		m.Affinity.LoadBound = DefaultAffinityBound
	}
	switch {
	case m.Affinity.LoadSlack == 0:
		m.Affinity.LoadSlack = DefaultAffinitySlack
	case m.Affinity.LoadSlack < -1:
		return fmt.Errorf("%s.affinity.load_slack: %d must be positive, or -1 for none", field, m.Affinity.LoadSlack)
	}
	switch m.Affinity.Policy {
	case "":
		m.Affinity.Policy = AffinityCacheAware
	case AffinityCacheAware, AffinityPrefixHash:
	default:
		return fmt.Errorf("%s.affinity.policy: %q must be %s or %s", field, m.Affinity.Policy, AffinityCacheAware, AffinityPrefixHash)
	}
	if m.Affinity.LoadBound < 1 {
		return fmt.Errorf("%s.affinity.load_bound: %g must be >= 1", field, m.Affinity.LoadBound)
	}
	if err := m.validateKVEvents(field); err != nil {
		return err
	}
	if m.Canary != nil {
		return m.Canary.validate(field + ".canary")
	}
	return nil
}

// validateKVEvents checks the pool's and its replicas' kv_events: the cache-aware policy
// is what reads them, and only vLLM's and SGLang's engines publish them.
func (m *Model) validateKVEvents(field string) error {
	set := m.KVEvents != nil
	if m.KVEvents != nil {
		if err := m.KVEvents.validate(field + ".kv_events"); err != nil {
			return err
		}
		if d := m.ReplicasFrom; d != nil && !publishesKVEvents(d.Engine) {
			return fmt.Errorf("%s.kv_events: replicas_from.engine is %s; only vLLM's and SGLang's KV events are read", field, d.Engine)
		}
	}
	for j := range m.Replicas {
		r := &m.Replicas[j]
		f := fmt.Sprintf("%s.replicas[%d]", field, j)
		if r.KVEvents != nil {
			set = true
			if err := r.KVEvents.validate(f + ".kv_events"); err != nil {
				return err
			}
		}
		if (r.KVEvents != nil || m.KVEvents != nil) && !publishesKVEvents(r.Engine) {
			return fmt.Errorf("%s.kv_events: engine is %s; only vLLM's and SGLang's KV events are read (set kv_events on those replicas only)", f, r.Engine)
		}
	}
	if set && (m.Affinity.Policy != AffinityCacheAware || m.Affinity.PrefixBytes < 0) {
		return fmt.Errorf("%s.kv_events: read by affinity.policy %s only (the pool has %s, prefix_bytes %d)",
			field, AffinityCacheAware, m.Affinity.Policy, m.Affinity.PrefixBytes)
	}
	return nil
}

// publishesKVEvents reports whether a replica of engine (as configured; "" when found
// from its metrics) may have kv_events: vLLM and SGLang publish them alike.
func publishesKVEvents(engine string) bool {
	return engine == "" || engine == "vllm" || engine == "sglang"
}

func (c *Canary) validate(field string) error {
	if err := defaultPositive(&c.Every, DefaultCanaryEvery, field+".every"); err != nil {
		return err
	}
	if c.Every.D() < time.Second {
		return fmt.Errorf("%s.every: %s is below the minimum of 1s", field, c.Every.D())
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultCanaryMaxTokens
	}
	if c.MaxTokens < 1 || c.MaxTokens > 256 {
		return fmt.Errorf("%s.max_tokens: %d must be between 1 and 256", field, c.MaxTokens)
	}
	if c.CompareTokens == 0 {
		c.CompareTokens = min(DefaultCanaryCompareTokens, c.MaxTokens)
	}
	if c.CompareTokens < 1 || c.CompareTokens > c.MaxTokens {
		return fmt.Errorf("%s.compare_tokens: %d must be between 1 and max_tokens (%d)", field, c.CompareTokens, c.MaxTokens)
	}
	if c.MaxLogprobDistance < 0 {
		return fmt.Errorf("%s.max_logprob_distance: %g must be >= 0", field, c.MaxLogprobDistance)
	}
	switch c.ExcludeFrom {
	case "":
		c.ExcludeFrom = CanaryExcludeReruns
	case CanaryExcludeReruns, CanaryExcludeAll:
	default:
		return fmt.Errorf("%s.exclude_from: %q is neither %s nor %s", field, c.ExcludeFrom, CanaryExcludeReruns, CanaryExcludeAll)
	}
	if c.Prompt == "" {
		c.Prompt = DefaultCanaryPrompt
	}
	if c.CacheCheck == nil {
		on := true
		c.CacheCheck = &on
	}
	if c.CacheBlocks == nil {
		c.CacheBlocks = slices.Clone(DefaultCanaryCacheBlocks)
	}
	if c.CacheChecked() && len(c.CacheBlocks) == 0 {
		return fmt.Errorf("%s.cache_blocks: empty; turn the check off with cache_check: false", field)
	}
	for _, k := range c.CacheBlocks {
		if k < 1 || k > MaxCanaryCacheBlocks {
			return fmt.Errorf("%s.cache_blocks: %d must be between 1 and %d", field, k, MaxCanaryCacheBlocks)
		}
	}
	if c.CacheBlockSize == 0 {
		c.CacheBlockSize = DefaultCanaryCacheBlock
	}
	if c.CacheBlockSize < 1 || c.CacheBlockSize > 1024 {
		return fmt.Errorf("%s.cache_block_size: %d must be between 1 and 1024", field, c.CacheBlockSize)
	}
	return nil
}

func (p *Policy) validate() error {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > 10 {
		return fmt.Errorf("policy.max_attempts: %d must be between 1 and 10", p.MaxAttempts)
	}
	if err := defaultPositive(&p.IdleTimeout, DefaultIdleTimeout, "policy.idle_timeout"); err != nil {
		return err
	}
	if err := defaultPositive(&p.FirstTokenTimeout, DefaultFirstTokenTimeout, "policy.first_token_timeout"); err != nil {
		return err
	}
	if err := defaultPositive(&p.NonStreamTimeout, DefaultNonStreamTimeout, "policy.non_stream_timeout"); err != nil {
		return err
	}
	if err := defaultPositive(&p.Keepalive, DefaultKeepalive, "policy.keepalive"); err != nil {
		return err
	}
	if err := defaultPositive(&p.ClientWriteTimeout, DefaultClientWrite, "policy.client_write_timeout"); err != nil {
		return err
	}
	if p.MaxRequestDuration < 0 {
		if p.MaxRequestDuration == invalidDuration {
			return fmt.Errorf("policy.max_request_duration: not a duration (write e.g. 10m)")
		}
		return fmt.Errorf("policy.max_request_duration: must be >= 0")
	}
	if p.MaxHeldBytes == 0 {
		p.MaxHeldBytes = DefaultMaxHeldBytes
	}
	if p.MaxHeldBytes < 1024 {
		return fmt.Errorf("policy.max_held_bytes: %d is below the minimum of 1024", p.MaxHeldBytes)
	}
	if p.MaxRerunPrefillTokens < 0 {
		return fmt.Errorf("policy.max_rerun_prefill_tokens: %d must be >= 0", p.MaxRerunPrefillTokens)
	}
	if p.MaxRerunPrefillTime < 0 && p.MaxRerunPrefillTime != invalidDuration {
		return fmt.Errorf("policy.max_rerun_prefill_time: must be >= 0")
	}
	if p.MaxRerunPrefillTime == invalidDuration {
		return fmt.Errorf("policy.max_rerun_prefill_time: not a duration (write e.g. 500ms, 30s, 2m)")
	}
	if p.PrefillTokensPerSecond == 0 {
		p.PrefillTokensPerSecond = DefaultPrefillRate
	}
	if p.PrefillTokensPerSecond < 0 {
		return fmt.Errorf("policy.prefill_tokens_per_second: %g must be positive", p.PrefillTokensPerSecond)
	}
	if err := p.validateEngineTools(); err != nil {
		return err
	}
	b := &p.RetryBudget
	if err := defaultFloat(&b.Ratio, DefaultBudgetRatio, 0, 1, "policy.retry_budget.ratio"); err != nil {
		return err
	}
	if err := defaultFloat(&b.MinPerSecond, DefaultBudgetPerSecond, 0, 1e6, "policy.retry_budget.min_per_second"); err != nil {
		return err
	}
	return defaultFloat(&b.Burst, DefaultBudgetBurst, 1, 1e9, "policy.retry_budget.burst")
}

func (h *Health) validate() error {
	for _, d := range []struct {
		v     *Duration
		def   time.Duration
		field string
	}{
		{&h.ProbeEvery, DefaultProbeEvery, "health.probe_every"},
		{&h.ProbeTimeout, DefaultProbeTimeout, "health.probe_timeout"},
		{&h.DeadCooldown, DefaultDeadCooldown, "health.dead_cooldown"},
		{&h.DialTimeout, DefaultDialTimeout, "health.dial_timeout"},
		{&h.ScrapeEvery, DefaultScrapeEvery, "health.scrape_every"},
	} {
		if err := defaultPositive(d.v, d.def, d.field); err != nil {
			return err
		}
	}
	switch {
	case h.EjectAfter == 0:
		h.EjectAfter = DefaultEjectAfter
	case h.EjectAfter < -1:
		return fmt.Errorf("health.eject_after: %d must be positive, or -1 to never eject a replica", h.EjectAfter)
	}
	return nil
}

func (a *Auth) validate() error {
	seen := map[string]bool{}
	ids := map[string]bool{}
	check := func(list []APIKey, field string, admin bool) error {
		for i := range list {
			k := &list[i]
			f := fmt.Sprintf("%s[%d]", field, i)
			if k.ID == "" {
				return fmt.Errorf("%s.id: required", f)
			}
			if ids[k.ID] {
				return fmt.Errorf("%s.id: %q is used twice (the journal tells keys apart by id)", f, k.ID)
			}
			ids[k.ID] = true
			switch {
			case k.Key != "" && k.KeySHA256 != "":
				return fmt.Errorf("%s: key and key_sha256 are both set; choose one", f)
			case k.Key == "" && k.KeySHA256 == "":
				return fmt.Errorf("%s.key: required (or key_sha256)", f)
			case k.Key != "" && len(k.Key) < 16:
				return fmt.Errorf("%s.key: must be at least 16 characters", f)
			case k.KeySHA256 != "":
				k.KeySHA256 = strings.ToLower(k.KeySHA256)
				if b, err := hex.DecodeString(k.KeySHA256); err != nil || len(b) != sha256.Size {
					return fmt.Errorf("%s.key_sha256: want the 64 hex digits of the key's SHA-256", f)
				}
			}
			digest := k.KeySHA256
			if k.Key != "" {
				sum := sha256.Sum256([]byte(k.Key))
				digest = hex.EncodeToString(sum[:])
			}
			if seen[digest] {
				return fmt.Errorf("%s.key: the same key is listed twice", f)
			}
			seen[digest] = true
			for j, m := range k.Models {
				if m == "" {
					return fmt.Errorf("%s.models[%d]: empty model name", f, j)
				}
			}
			if admin && (len(k.Models) > 0 || k.MaxConcurrent != 0 || k.RPM != 0 || k.TPM != 0 || k.Traces != "") {
				return fmt.Errorf("%s: admin keys take no models, limits or traces", f)
			}
			if admin && (k.Weight != 0 || k.Priority != 0 || k.FairnessHeader || k.PriorityHeader) {
				return fmt.Errorf("%s: admin keys take no weight, priority or queue headers", f)
			}
			switch {
			case k.Weight == 0 && !admin:
				k.Weight = 1
			case k.Weight < 0:
				return fmt.Errorf("%s.weight: %d must be positive", f, k.Weight)
			}
			if k.Priority < MinPriority || k.Priority > MaxPriority {
				return fmt.Errorf("%s.priority: %d is outside [%d, %d]", f, k.Priority, MinPriority, MaxPriority)
			}
			if err := k.Traces.normalize(f + ".traces"); err != nil {
				return err
			}
			for _, l := range []struct {
				v    int
				name string
			}{{k.MaxConcurrent, "max_concurrent"}, {k.RPM, "rpm"}, {k.TPM, "tpm"}} {
				if l.v < 0 {
					return fmt.Errorf("%s.%s: %d must be >= 0 (0: no limit)", f, l.name, l.v)
				}
			}
		}
		return nil
	}
	if err := check(a.Keys, "auth.keys", false); err != nil {
		return err
	}
	if err := check(a.AdminKeys, "auth.admin_keys", true); err != nil {
		return err
	}
	if err := defaultPositive(&a.StoreRefresh, DefaultKeyStoreRefresh, "auth.store_refresh"); err != nil {
		return err
	}
	if a.StoreKeys == nil {
		on := true
		a.StoreKeys = &on
	}
	if a.StoreRefresh.D() < 100*time.Millisecond {
		return fmt.Errorf("auth.store_refresh: %s is below the minimum of 100ms", a.StoreRefresh.D())
	}
	return nil
}

func (s *Server) validate() error {
	for _, d := range []struct {
		v     *Duration
		def   time.Duration
		field string
	}{
		{&s.ReadHeaderTimeout, DefaultReadHeaderTimeout, "server.read_header_timeout"},
		{&s.BodyReadTimeout, DefaultBodyReadTimeout, "server.body_read_timeout"},
		{&s.IdleTimeout, DefaultServerIdleTimeout, "server.idle_timeout"},
	} {
		if err := defaultPositive(d.v, d.def, d.field); err != nil {
			return err
		}
	}
	if s.MaxHeaderBytes == 0 {
		s.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if s.MaxHeaderBytes < 4096 {
		return fmt.Errorf("server.max_header_bytes: %d is below the minimum of 4096", s.MaxHeaderBytes)
	}
	switch {
	case s.MaxConnections == 0:
		s.MaxConnections = DefaultMaxConnections
	case s.MaxConnections < -1:
		return fmt.Errorf("server.max_connections: %d must be positive, or -1 for no bound", s.MaxConnections)
	}
	return nil
}

// backendFromEnv sets Backend from the variable BackendEnv names, and reports whether it
// did. Validating a validated configuration again finds Backend already equal to it.
func (l *Limits) backendFromEnv() (bool, error) {
	if l.BackendEnv == "" {
		return false, nil
	}
	v := strings.TrimSpace(os.Getenv(l.BackendEnv))
	if v == "" {
		return false, fmt.Errorf("limits.backend_env: the environment variable %s is not set", l.BackendEnv)
	}
	if l.Backend != "" && l.Backend != v {
		return false, fmt.Errorf("limits: backend and backend_env are both set; choose one")
	}
	l.Backend = v
	return true, nil
}

func (l *Limits) validate() error {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxBodyBytes < 1024 {
		return fmt.Errorf("limits.max_body_bytes: %d is below the minimum of 1024", l.MaxBodyBytes)
	}
	fromEnv, err := l.backendFromEnv()
	if err != nil {
		return err
	}
	switch {
	case fromEnv && !strings.HasPrefix(l.Backend, limitsRedisScheme) && !strings.HasPrefix(l.Backend, limitsRedissScheme):
		// Not quoted: the variable may hold a password.
		return fmt.Errorf("limits.backend_env: %s does not hold a redis://HOST:PORT/DB URL", l.BackendEnv)
	case l.Backend == "":
		l.Backend = LimitsLocal
	case l.Backend == LimitsLocal:
	case strings.HasPrefix(l.Backend, limitsRedisScheme), strings.HasPrefix(l.Backend, limitsRedissScheme):
		u, err := url.Parse(l.Backend)
		if err != nil || u.Host == "" {
			return fmt.Errorf("limits.backend: not a redis://HOST:PORT/DB URL")
		}
		if db := strings.Trim(u.Path, "/"); db != "" {
			if _, err := strconv.Atoi(db); err != nil {
				return fmt.Errorf("limits.backend: the database %q is not a number", db)
			}
		}
	default:
		return fmt.Errorf("limits.backend: %q is neither local nor redis://HOST:PORT/DB", l.Backend)
	}
	switch l.OnBackendError {
	case "":
		l.OnBackendError = LimitsFailOpen
	case LimitsFailOpen, LimitsFailClosed:
	default:
		return fmt.Errorf("limits.on_backend_error: %q is neither open nor closed", l.OnBackendError)
	}
	if l.KeyPrefix == "" {
		l.KeyPrefix = DefaultLimitsKeyPrefix
	}
	return nil
}

// validateAdminListen checks admin_listen: an admin listener reachable from other hosts
// must not serve admin calls to anyone who can connect, so it needs admin keys.
func (c *Config) validateAdminListen() error {
	if c.AdminListen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.AdminListen); err != nil {
		return fmt.Errorf("admin_listen: %q is not host:port: %w", c.AdminListen, err)
	}
	if _, port, _ := net.SplitHostPort(c.AdminListen); c.AdminListen == c.Listen && port != "0" {
		return fmt.Errorf("admin_listen: %q is also listen; give the admin listener an address of its own", c.AdminListen)
	}
	if !IsLoopback(c.AdminListen) && len(c.Auth.AdminKeys) == 0 {
		return fmt.Errorf("admin_listen: %q is not a loopback address, so auth.admin_keys are required", c.AdminListen)
	}
	return nil
}

// IsLoopback reports whether a host:port names a loopback address (127.0.0.0/8, ::1 or
// localhost), one that only this host can reach.
func IsLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func defaultPositive(d *Duration, def time.Duration, field string) error {
	if *d == invalidDuration {
		return fmt.Errorf("%s: not a duration (write e.g. 500ms, 30s, 2m)", field)
	}
	if *d == 0 {
		*d = Duration(def)
	}
	if *d < 0 {
		return fmt.Errorf("%s: %s must be positive", field, d.D())
	}
	return nil
}

func defaultFloat(v **float64, def, lo, hi float64, field string) error {
	if *v == nil {
		x := def
		*v = &x
	}
	if **v < lo || **v > hi {
		return fmt.Errorf("%s: %g must be between %g and %g", field, **v, lo, hi)
	}
	return nil
}

func (d *Discovery) validate(field string) error {
	if d.DNS == "" {
		return fmt.Errorf("%s.dns: required", field)
	}
	if d.Port < 1 || d.Port > 65535 {
		return fmt.Errorf("%s.port: %d is not a port (1..65535)", field, d.Port)
	}
	if err := defaultPositive(&d.Every, DefaultDiscoveryEvery, field+".every"); err != nil {
		return err
	}
	if d.Every.D() < 100*time.Millisecond {
		return fmt.Errorf("%s.every: %s is below the minimum of 100ms", field, d.Every.D())
	}
	switch d.Scheme {
	case "":
		d.Scheme = "http"
	case "http", "https":
	default:
		return fmt.Errorf("%s.scheme: %q is neither http nor https", field, d.Scheme)
	}
	if d.Engine != "" && !slices.Contains(EngineKinds, d.Engine) {
		return fmt.Errorf("%s.engine: %q is not one of %s", field, d.Engine, strings.Join(EngineKinds, ", "))
	}
	if d.Priority < 0 {
		return fmt.Errorf("%s.priority: %d must be >= 0", field, d.Priority)
	}
	for k := range d.Fingerprint {
		if !slices.Contains(FingerprintKeys, k) {
			return fmt.Errorf("%s.fingerprint.%s: unknown key (known: %s)", field, k, strings.Join(FingerprintKeys, ", "))
		}
	}
	if d.NameTemplate == "" {
		d.NameTemplate = DefaultNameTemplate
	}
	if err := validateNameTemplate(d.NameTemplate, field+".name_template"); err != nil {
		return err
	}
	return nil
}
