//go:build linux

package upstream

import (
	"syscall"
	"testing"
)

// awaitPeerClose blocks until the engine's close of the idle connection c has arrived,
// without reading it: the poller wakes the peek when the socket becomes readable.
func awaitPeerClose(t *testing.T, c *conn) {
	t.Helper()
	buf := make([]byte, 1)
	err := c.raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return n == 0 && err == nil // 0 bytes without error: the FIN
	})
	if err != nil {
		t.Fatal(err)
	}
}
