//go:build linux

package sockio

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const rawCalls = true

// maxIovecs bounds one writev's buffers; more go in the next call.
const maxIovecs = 8

// writeRaw writes bufs (the first non-empty) to fd: write(2) for one buffer, writev(2)
// for more. It never blocks: fd is non-blocking.
func writeRaw(fd uintptr, bufs [][]byte) (int, syscall.Errno) {
	if len(bufs) == 1 {
		b := bufs[0]
		n, _, errno := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		return int(n), errno
	}
	var iov [maxIovecs]unix.Iovec
	k := 0
	for _, b := range bufs {
		if k == maxIovecs {
			break
		}
		if len(b) == 0 {
			continue
		}
		iov[k].Base = &b[0]
		iov[k].SetLen(len(b))
		k++
	}
	n, _, errno := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
	return int(n), errno
}

// Read reads from fd into b, raw, retrying an interrupted call: for a caller that reads
// under its RawConn's Read (which waits, with the poller, on EAGAIN). b must not be empty.
func Read(fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), 0
	}
}

// Peek reads up to len(b) bytes from fd without taking them from the socket and without
// waiting (MSG_PEEK|MSG_DONTWAIT): EAGAIN when nothing is there. b must not be empty.
func Peek(fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), 0
	}
}
