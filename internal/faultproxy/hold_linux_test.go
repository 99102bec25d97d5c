//go:build linux

package faultproxy

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
)

// bindBare binds a socket to addr without SO_REUSEADDR, as a listener that wants the port
// to itself would, and reports the error.
func bindBare(t *testing.T, addr string) error {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	return syscall.Bind(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
}

// TestRefusingHoldsThePort: while the proxy refuses, its port stays bound — no other
// socket is given it — and connections to it are still refused; listening again and
// closing let it go.
func TestRefusingHoldsThePort(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	addr := p.Addr()
	p.Refuse(true)
	if err := bindBare(t, addr); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("binding the refusing proxy's port: %v, want EADDRINUSE", err)
	}
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial while refusing: %v, want ECONNREFUSED", err)
	}
	p.Refuse(false)
	if err := p.Err(); err != nil {
		t.Fatalf("listen again: %v", err)
	}
	conn := dial(t, addr)
	send(t, conn, "back")
	expect(t, conn, "back")
	_ = conn.Close()

	p.Refuse(true)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.hold != nil {
		t.Fatal("Close left the port held")
	}
}
