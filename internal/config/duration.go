package config

import (
	"math"
	"time"
)

// Duration is a time.Duration written in YAML as a Go duration string ("30s", "1m30s").
type Duration time.Duration

// invalidDuration marks a value that did not parse. The YAML decoder does not say where a
// text unmarshaler failed, so the error is raised by Validate, which knows the field's name.
const invalidDuration = Duration(math.MinInt64)

// UnmarshalText parses a duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		*d = invalidDuration
		return nil
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
