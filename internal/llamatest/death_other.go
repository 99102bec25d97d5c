//go:build !linux

package llamatest

import "os/exec"

// setDeathSignal does nothing where the kernel offers no parent-death signal; the test's
// cleanups still kill the servers.
func setDeathSignal(cmd *exec.Cmd) {}
