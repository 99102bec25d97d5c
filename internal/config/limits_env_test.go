package config

import (
	"strings"
	"testing"
)

// limits.backend_env takes the Redis URL, password and all, from the environment, so the
// file that names it can be readable (a ConfigMap) while the URL stays in a Secret.
func TestLimitsBackendFromEnv(t *testing.T) {
	const base = "models:\n  - name: m\n    replicas: [{url: 'http://a:1'}]\n"
	const secretURL = "redis://:s3cret-password@redis.example:6379/2"
	t.Setenv("FENCEGATE_TEST_LIMITS_REDIS", secretURL)
	c, err := Parse([]byte(base + "limits:\n  backend_env: FENCEGATE_TEST_LIMITS_REDIS\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.Backend != secretURL {
		t.Fatalf("backend %q, want the variable's value", c.Limits.Backend)
	}
	// serve validates a validated configuration again (FENCEGATE_STORE): nothing changes.
	if err := c.Validate(); err != nil || c.Limits.Backend != secretURL {
		t.Fatalf("validated again: %v, backend %q", err, c.Limits.Backend)
	}

	t.Setenv("FENCEGATE_TEST_LIMITS_BAD", "memcached://:s3cret-password@x:1")
	t.Setenv("FENCEGATE_TEST_LIMITS_EMPTY", "")
	for in, want := range map[string]string{
		"limits:\n  backend_env: FENCEGATE_TEST_LIMITS_UNSET\n":                           "limits.backend_env: the environment variable FENCEGATE_TEST_LIMITS_UNSET is not set",
		"limits:\n  backend_env: FENCEGATE_TEST_LIMITS_EMPTY\n":                           "limits.backend_env: the environment variable FENCEGATE_TEST_LIMITS_EMPTY is not set",
		"limits:\n  backend_env: FENCEGATE_TEST_LIMITS_BAD\n":                             "limits.backend_env: FENCEGATE_TEST_LIMITS_BAD does not hold a redis://HOST:PORT/DB URL",
		"limits:\n  backend: local\n  backend_env: FENCEGATE_TEST_LIMITS_REDIS\n":         "limits: backend and backend_env are both set",
		"limits:\n  backend: redis://x:1/0\n  backend_env: FENCEGATE_TEST_LIMITS_REDIS\n": "limits: backend and backend_env are both set",
	} {
		_, err := Parse([]byte(base + in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error shows the variable's password: %v", in, err)
		}
	}
}
