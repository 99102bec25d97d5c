//go:build !linux

package faultproxy

import "errors"

// holdPort is Linux's only (hold_linux.go): elsewhere a refusing proxy's port is free
// for another listener while it refuses, as it always was.
func holdPort(string) (func(), error) {
	return nil, errors.New("faultproxy: holding a port is not supported here")
}
