package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gatewayGCPercent is the garbage collector's target for serve and agent when GOGC is not
// set. A gateway's live heap is small (configuration, pools, one owner per open request)
// while it allocates for every request, so Go's default of 100 collects very often: at 64
// streams of 64 tokens the collector took about a fifth of the gateway's CPU, and 400
// saved that much (docs/performance.md) for a few MiB more of heap.
const gatewayGCPercent = 400

// memoryLimitShare is the share of a container's memory limit given to GOMEMLIMIT when
// it is not set: as the heap nears it the collector runs more often again, so the higher
// GC target cannot push the process past its cgroup limit.
const memoryLimitShare = 0.9

// gcSettings is what tuneGC chose; zero fields mean "left as the environment says".
type gcSettings struct {
	percent     int
	memoryLimit int64
}

// chooseGC decides the collector's settings from the environment (GOGC, GOMEMLIMIT) and the
// cgroup's memory limit (memoryMax, the contents of memory.max; empty when unknown). What
// the operator set always wins.
func chooseGC(getenv func(string) string, memoryMax string) gcSettings {
	var s gcSettings
	if getenv("GOGC") == "" {
		s.percent = gatewayGCPercent
	}
	if getenv("GOMEMLIMIT") == "" {
		if n, err := strconv.ParseInt(strings.TrimSpace(memoryMax), 10, 64); err == nil && n > 0 {
			s.memoryLimit = int64(float64(n) * memoryLimitShare)
		}
	}
	return s
}

// tuneGC applies chooseGC's settings to this process and logs them.
func tuneGC(log *slog.Logger) {
	memoryMax, _ := os.ReadFile("/sys/fs/cgroup/memory.max") // cgroup v2; "max" when unlimited
	s := chooseGC(os.Getenv, string(memoryMax))
	if s.percent != 0 {
		debug.SetGCPercent(s.percent)
	}
	if s.memoryLimit != 0 {
		debug.SetMemoryLimit(s.memoryLimit)
	}
	if s.percent != 0 || s.memoryLimit != 0 {
		log.Info("garbage collector tuned", "gc_percent", s.percent, "memory_limit_bytes", s.memoryLimit)
	}
}
