//go:build unix

package store_test

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is this process's CPU time so far (user + system), which, unlike
// ns/op, leaves out the time a busy machine gives to other processes (and,
// for PostgreSQL, the server's own work).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
