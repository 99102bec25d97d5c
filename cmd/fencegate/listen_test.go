package main

import (
	"net"
	"syscall"
	"testing"
)

// The listener serve opens keeps the socket of every connection it accepts reachable
// (syscall.Conn and CloseWrite): the HTTP server watches each for a client that leaves,
// which a wrap that hides the socket would silently turn off.
func TestListenKeepsEachConnectionsSocket(t *testing.T) {
	for _, maxConns := range []int{-1, 10} {
		ln, err := listen("127.0.0.1:0", maxConns)
		if err != nil {
			t.Fatal(err)
		}
		dialed := make(chan net.Conn, 1)
		go func() {
			c, _ := net.Dial("tcp", ln.Addr().String())
			dialed <- c
		}()
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.(syscall.Conn); !ok {
			t.Errorf("max_connections %d: an accepted %T has no SyscallConn", maxConns, c)
		}
		if _, ok := c.(interface{ CloseWrite() error }); !ok {
			t.Errorf("max_connections %d: an accepted %T has no CloseWrite", maxConns, c)
		}
		c.Close()
		if d := <-dialed; d != nil {
			d.Close()
		}
		ln.Close()
	}
}
