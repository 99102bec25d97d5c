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
	if tree.user < own.user || tree.system < own.system {
		t.Fatalf("the tree's CPU time %+v is below the process's own %+v", tree, own)
	}
	if _, err := peakRSS(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

// Work in user space shows as user time, not system time: utime and stime are told apart
// in the order /proc/PID/stat gives them. The loop computes in long stretches between its
// reads of /proc (each read is a system call), until the user time has moved by a few
// ticks; then the system time must have moved by less.
func TestUserTimeIsUserSpaceWork(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: --pid reads Linux's")
	}
	before, err := processCPUTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	var now cpuTime
	for i := 0; ; i++ {
		for range 20_000_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if now, err = processCPUTicks(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if now.user-before.user >= 5 {
			break
		}
		if i == 10_000 {
			t.Fatalf("no user time after %d stretches of arithmetic: %+v → %+v", i, before, now)
		}
	}
	used := now.sub(before)
	if used.system >= used.user {
		t.Fatalf("arithmetic took %d ticks of system time and %d of user time (x=%d)", used.system, used.user, x)
	}
}
