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

// cpuTime is CPU time in units of 1/userHZ seconds, as /proc/PID/stat gives it: in user
// space (utime) and in the kernel on the process's behalf (stime). The two are kept apart
// because they say different things of a proxy: its system time is mostly the kernel's
// work per read and write, which every proxy of the same traffic pays alike; its user time
// is its own code and runtime.
type cpuTime struct{ user, system int64 }

func (c cpuTime) total() int64 { return c.user + c.system }

func (c cpuTime) add(more cpuTime) cpuTime {
	return cpuTime{c.user + more.user, c.system + more.system}
}

func (c cpuTime) sub(before cpuTime) cpuTime {
	return cpuTime{c.user - before.user, c.system - before.system}
}

// cpuTicks returns the CPU time pid and its live descendants have used. The descendants
// count because servers such as nginx do their work in worker processes under the one
// whose id is given.
func cpuTicks(pid int) (cpuTime, error) {
	total, err := processCPUTicks(pid)
	if err != nil {
		return cpuTime{}, err
	}
	for _, child := range descendants(pid) {
		if t, err := processCPUTicks(child); err == nil { // a child may have just exited
			total = total.add(t)
		}
	}
	return total, nil
}

// processCPUTicks is one process's utime and stime.
func processCPUTicks(pid int) (cpuTime, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTime{}, fmt.Errorf("bench: reading the CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may itself contain spaces and
	// parentheses, so the fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return cpuTime{}, fmt.Errorf("bench: /proc/%d/stat has no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return cpuTime{}, fmt.Errorf("bench: /proc/%d/stat has %d fields after the name", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return cpuTime{}, fmt.Errorf("bench: /proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return cpuTime{user: utime, system: stime}, nil
}

// peakRSS returns the peak resident set size of pid and its live descendants in bytes:
// the sum of their VmHWM from /proc/PID/status (an upper bound when their peaks did not
// coincide).
func peakRSS(pid int) (int64, error) {
	total, err := processPeakRSS(pid)
	if err != nil {
		return 0, err
	}
	for _, child := range descendants(pid) {
		if b, err := processPeakRSS(child); err == nil {
			total += b
		}
	}
	return total, nil
}

// processPeakRSS is one process's VmHWM.
//
// VmHWM is a high-water mark the kernel keeps from the process's start. It never goes
// down on its own, so read after a run it covers everything the process did before the
// run too, unless it was reset: writing "5" to /proc/PID/clear_refs (Linux 4.0 and
// later) sets it to the current RSS (see resetPeakRSS). Without that reset, a second run
// against the same process can only report a peak as high as the first's.
func processPeakRSS(pid int) (int64, error) {
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
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return err
	}
	for _, child := range descendants(pid) {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", child), []byte("5"), 0)
	}
	return nil
}

// descendants lists the live processes below pid (children, their children, …), found
// by each process's parent id in /proc/*/stat. A process that exits while it is read is
// left out.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:]) // fields[1] is field 4, the parent's id
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(string(fields[1])); err == nil {
			children[ppid] = append(children[ppid], id)
		}
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		out = append(out, id)
		queue = append(queue, children[id]...)
	}
	return out
}
