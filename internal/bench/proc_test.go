package bench

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// A server such as nginx works in child processes: --pid counts the whole tree, so the
// children of the given process must be found.
func TestDescendantsFindsChildProcesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: --pid reads Linux's")
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Skipf("no sleep(1) to start as a child: %v", err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	if got := descendants(os.Getpid()); !slices.Contains(got, child.Process.Pid) {
		t.Fatalf("descendants of %d are %v, without the child %d", os.Getpid(), got, child.Process.Pid)
	}
	if got := descendants(child.Process.Pid); len(got) != 0 {
		t.Fatalf("sleep has no children, found %v", got)
	}
	own, err := processCPUTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := cpuTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if tree < own {
		t.Fatalf("the tree's CPU time %d is below the process's own %d", tree, own)
	}
	if _, err := peakRSS(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}
