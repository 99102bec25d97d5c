package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// userHZ is the unit of the CPU times in /proc/PID/stat. The kernel reports them in
// USER_HZ, which is 100 on every architecture Go runs Linux on, whatever the kernel's
// own tick rate; reading it from sysconf would need cgo.
const userHZ = 100

// cpuTicks returns the CPU time pid has used, user and system (utime + stime), in
// units of 1/userHZ seconds.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: reading the CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may itself contain spaces and
	// parentheses, so the fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc/%d/stat has no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("bench: /proc/%d/stat has %d fields after the name", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: /proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return utime + stime, nil
}

// peakRSS returns pid's peak resident set size in bytes: VmHWM from /proc/PID/status.
//
// VmHWM is a high-water mark the kernel keeps from the process's start. It never goes
// down on its own, so read after a run it covers everything the process did before the
// run too, unless it was reset: writing "5" to /proc/PID/clear_refs (Linux 4.0 and
// later) sets it to the current RSS (see resetPeakRSS). Without that reset, a second run
// against the same process can only report a peak as high as the first's.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: reading the memory of process %d: %w", pid, err)
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest) // "  12345 kB"
		if len(fields) != 2 || string(fields[1]) != "kB" {
			break
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("bench: /proc/%d/status has no VmHWM (a kernel thread, or not Linux)", pid)
}

// resetPeakRSS sets pid's VmHWM to its current RSS, so that the peak read after a run
// is the run's own. Value 5 of clear_refs touches nothing else (1 to 4 clear page bits
// that reclaim uses). It needs the right to write the file, which the owner of the
// process (or root) has.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
