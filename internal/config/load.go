package config

import (
	"bytes"
	"fmt"
	"os"

	"github.com/goccy/go-yaml"
)

// LoadFile reads, parses and validates the configuration at path.
func LoadFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse parses and validates a YAML configuration. Unknown fields are errors.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b), yaml.DisallowUnknownField())
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse: %s", yaml.FormatError(err, false, true))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
