package gateway

import (
	"fmt"
	"os"
	"strings"

	"github.com/fencegate/fencegate/internal/config"
)

// engineKey reads the engine API key of replica j of model m (its own setting, else the
// model's): a file's trimmed content or an environment variable's value. A setting that
// names nothing usable is a configuration error, named by field.
func engineKey(m config.Model, j int, field string) (string, error) {
	r := m.Replicas[j]
	file, env := r.APIKeyFile, r.APIKeyEnv
	if file == "" && env == "" {
		file, env, field = m.APIKeyFile, m.APIKeyEnv, field[:strings.LastIndex(field, ".replicas[")]
	}
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s.api_key_file: %w", field, err)
		}
		key := strings.TrimSpace(string(b))
		if key == "" {
			return "", fmt.Errorf("%s.api_key_file: %s is empty", field, file)
		}
		return key, nil
	case env != "":
		key := strings.TrimSpace(os.Getenv(env))
		if key == "" {
			return "", fmt.Errorf("%s.api_key_env: the environment variable %s is not set", field, env)
		}
		return key, nil
	}
	return "", nil
}

// agentKey is the secret requests to the member's agent carry ("" without an agent).
func (m *member) agentKey() string {
	if m.link == nil {
		return ""
	}
	return m.link.client.Secret.Current()
}
