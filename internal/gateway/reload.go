package gateway

import (
	"fmt"
	"net/http"
	"reflect"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/openai"
)

// Reload applies a new, validated configuration without dropping a stream: new requests
// use its models, replicas, keys and policy; running requests finish on what they started
// with (a request keeps its configuration and its attempts keep their replica). Replicas that
// leave drain and go once idle; replicas that join wait for a passing probe. Settings only a
// restart can change (listen addresses and the server's bounds, TLS, store, gateway id,
// leases, the agent secret file's path, owner lease, the limits backend) must be unchanged,
// or the reload is refused and the running configuration kept. Keys and their models and
// limits reload, and the files the configuration names are read again: engine keys and the
// agent secret file (which is also read every secretfile.DefaultPoll).
func (s *Server) Reload(cfg *config.Config) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if err := restartOnly(s.boot, cfg); err != nil {
		return err
	}
	if changed, err := s.agentSecret.Reload(); err != nil {
		return fmt.Errorf("agent_secret_file: %w; the configuration was not reloaded", err)
	} else if changed {
		s.log.Info("agent secret read again", "file", s.agentSecret.Path(), "secrets", s.agentSecret.Secrets().Len())
	}
	prev := s.current()
	l, err := s.build(cfg, prev)
	if err != nil {
		return err
	}
	s.live.Store(l)
	for name, p := range prev.pools {
		if l.pools[name] == nil {
			// The model is gone: no new requests reach it; its running ones finish.
			p.reconcile(s, "config", nil, false)
			s.startDiscovery(p, cfg)
		}
	}
	for _, p := range l.pools {
		s.startDiscovery(p, cfg)
	}
	s.log.Info("configuration reloaded", "models", l.modelNames())
	return nil
}

// restartOnly refuses a new configuration that changes what only a restart can.
func restartOnly(old, cfg *config.Config) error {
	for _, c := range restartOnlySettings(old, cfg) {
		if !reflect.DeepEqual(c.was, c.now) {
			return fmt.Errorf("%s: changing it needs a restart; the configuration was not reloaded", c.field)
		}
	}
	return nil
}

// restartSetting is one setting only a restart changes, in the running and the new
// configuration.
type restartSetting struct {
	field    string
	was, now any
}

// restartOnlySettings lists the settings only a restart can change: the listeners and
// what holds connections, the store and what other gateways or agents share with this
// one, and the periods of loops that Start begins.
func restartOnlySettings(old, cfg *config.Config) []restartSetting {
	return []restartSetting{
		{"listen", old.Listen, cfg.Listen},
		{"admin_listen", old.AdminListen, cfg.AdminListen},
		{"server", old.Server, cfg.Server},
		{"limits.backend", old.Limits.Backend, cfg.Limits.Backend},
		{"limits.backend_env", old.Limits.BackendEnv, cfg.Limits.BackendEnv},
		{"limits.on_backend_error", old.Limits.OnBackendError, cfg.Limits.OnBackendError},
		{"limits.key_prefix", old.Limits.KeyPrefix, cfg.Limits.KeyPrefix},
		{"auth.store_refresh", old.Auth.StoreRefresh, cfg.Auth.StoreRefresh},
		{"tls", old.TLS, cfg.TLS},
		{"store", old.Store, cfg.Store},
		{"gateway_id", old.GatewayID, cfg.GatewayID},
		{"leases", old.Leases, cfg.Leases},
		{"agent_secret_file", old.AgentSecretFile, cfg.AgentSecretFile},
		{"idempotency.owner_lease", old.Idempotency.OwnerLease, cfg.Idempotency.OwnerLease},
		{"health.probe_every", old.Health.ProbeEvery, cfg.Health.ProbeEvery},
		{"health.scrape_every", old.Health.ScrapeEvery, cfg.Health.ScrapeEvery},
		{"health.dial_timeout", old.Health.DialTimeout, cfg.Health.DialTimeout},
	}
}

// RestartOnlyKeys names the configuration keys, or sections, that only a restart changes:
// a reload that changes one is refused (docs/configuration.md lists them).
func RestartOnlyKeys() []string {
	var out []string
	for _, c := range restartOnlySettings(&config.Config{}, &config.Config{}) {
		out = append(out, c.field)
	}
	return out
}

// ReloadFile reads the configuration file again and reloads it (SIGHUP, POST /admin/reload).
func (s *Server) ReloadFile() error {
	if s.configPath == "" {
		return fmt.Errorf("the gateway was not started from a configuration file")
	}
	load := s.loadConfig
	if load == nil {
		load = config.LoadFile
	}
	cfg, err := load(s.configPath)
	if err != nil {
		return err
	}
	return s.Reload(cfg)
}

// handleReload reloads the configuration file; an invalid one is refused with the reason,
// and the running configuration kept.
//
//	POST /admin/reload
func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if err := s.ReloadFile(); err != nil {
		s.log.Error("configuration not reloaded; keeping the running one", "err", err)
		writeError(w, r, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_configuration",
			Message: "the configuration was not reloaded: " + err.Error(), RequestID: requestID(r)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reloaded": true, "models": s.current().models})
}
