package llamatest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the server when the test process dies without
// running its cleanups (a timeout's panic, a SIGKILL), so no engine outlives its test.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
