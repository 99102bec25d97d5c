// Package config loads and validates the gateway's YAML configuration.
//
// One documented struct describes everything the gateway needs; Load parses it strictly
// (unknown fields are errors), fills defaults, and validates it so that every error names
// the field at fault. It imports nothing from the rest of the project.
package config
