//go:build linux

package faultproxy

import (
	"fmt"
	"net/netip"
	"syscall"
)

// holdPort binds a socket to addr without listening on it and returns what closes it.
// While it is bound a connection to addr is still refused (a SYN that finds no listener
// is answered with a reset), but the kernel no longer hands the port to a listener that
// asks for any free one. Without it, the port of a refusing proxy was free for another
// test's listener on :0: the connections meant for the proxy then reached that listener
// and hung, and the proxy could not listen on its port again. SO_REUSEADDR lets the held
// port be shared with the connections the proxy accepted, which outlive its listener, and
// with the proxy's own next listener.
func holdPort(addr string) (release func(), err error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("faultproxy: hold %s: not an IPv4 address and port", addr)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: hold %s: %w", addr, err)
	}
	sa := &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("faultproxy: hold %s: %w", addr, err)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("faultproxy: hold %s: %w", addr, err)
	}
	return func() { syscall.Close(fd) }, nil
}
