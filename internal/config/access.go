package config

import "fmt"

// Metrics configures the gateway's own /metrics.
type Metrics struct {
	// Public serves /metrics on a shared listener (no admin_listen) to callers without an
	// admin key, for scrapers that cannot send a header. Off by default: the metrics name
	// every replica. On the admin listener /metrics is always served.
	Public bool `yaml:"public"`
}

// AdminAccess says, in one line for `fencegate check` and the start-up log, how the
// operator's calls (/admin/*, pprof) are reached under this configuration. storedAdmin is
// whether the store holds a valid admin key (`fencegate keys create --admin`); a caller
// that cannot tell passes false and gets a sentence that mentions it.
func (c *Config) AdminAccess(storedAdmin bool) string {
	admin := len(c.Auth.AdminKeys) > 0 || storedAdmin
	switch {
	case c.AdminListen != "" && IsLoopback(c.AdminListen):
		return fmt.Sprintf("admin calls: on the admin listener %s only, open to this host (loopback); the public listener serves /v1/* and /healthz", c.AdminListen)
	case c.AdminListen != "":
		return fmt.Sprintf("admin calls: on the admin listener %s only, with an admin key; the public listener serves /v1/* and /healthz", c.AdminListen)
	case admin:
		return "admin calls: on the one listener, with an admin key (a tenant key is refused: 403 admin_only)"
	}
	return "admin calls: off (403 admin_disabled): no admin key and no loopback admin_listen; add auth.admin_keys (or `fencegate keys create --admin`) or admin_listen: 127.0.0.1:PORT"
}
