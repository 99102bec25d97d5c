package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestForwardsBothWaysAndCounts(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") || p.URL() != "http://"+p.Addr() {
		t.Fatalf("Addr %q URL %q", p.Addr(), p.URL())
	}

	conn := dial(t, p.Addr())
	send(t, conn, "hello")
	expect(t, conn, "hello")

	// A byte is counted once its write returns, which may be just after the peer read it.
	await(t, p, "the exchange is counted", func(s Stats) bool { return s.UpstreamForwarded >= 5 && s.DownstreamForwarded >= 5 })
	s := p.Stats()
	if s.UpstreamForwarded != 5 || s.DownstreamForwarded != 5 || s.UpstreamDropped != 0 || s.DownstreamDropped != 0 {
		t.Fatalf("byte counts %+v, want 5 forwarded each way and nothing dropped", s)
	}
	if s.Accepted != 1 || s.Open != 1 {
		t.Fatalf("connections %+v, want 1 accepted and open", s)
	}

	// A half-close travels through: the server sees EOF, closes, and the client sees EOF.
	if err := conn.CloseWrite(); err != nil {
		t.Fatalf("close write: %v", err)
	}
	if r := receive(t, srv.ended, "server end"); r.err != nil || r.echoed != 5 {
		t.Fatalf("server ended with %+v, want a clean EOF after 5 bytes", r)
	}
	if n, err := conn.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after close = %d, %v; want EOF", n, err)
	}
	await(t, p, "the connection is closed", func(s Stats) bool { return s.Open == 0 })
}

func TestBlackHoleDropsThenHealForwards(t *testing.T) {
	for _, dir := range []Direction{Upstream, Downstream, Both} {
		t.Run(dir.String(), func(t *testing.T) {
			srv := startEcho(t)
			p := startProxy(t, srv.addr())
			before := dial(t, p.Addr()) // open before the black hole
			send(t, before, "ping")
			expect(t, before, "ping")

			p.BlackHole(dir)
			during := dial(t, p.Addr()) // accepted during the black hole
			for _, c := range []*net.TCPConn{before, during} {
				send(t, c, "lost!") // writes succeed: nothing pushes back
			}
			dropped := func(s Stats) int64 {
				if dir == Upstream || dir == Both {
					return s.UpstreamDropped // the server never sees it, so never echoes it
				}
				return s.DownstreamDropped
			}
			await(t, p, "both writes are dropped", func(s Stats) bool { return dropped(s) == 10 })

			p.Heal()
			// The first bytes each client reads are the new ones: "lost!" never came back.
			for _, c := range []*net.TCPConn{before, during} {
				send(t, c, "found")
				expect(t, c, "found")
			}

			wantUp, wantDown := int64(4+5+5+5+5), int64(4+5+5)
			if dir != Downstream {
				wantUp = 4 + 5 + 5
			}
			await(t, p, "the last writes are counted", func(s Stats) bool {
				return s.UpstreamForwarded >= wantUp && s.DownstreamForwarded >= wantDown
			})
			s := p.Stats()
			if s.UpstreamForwarded != wantUp || s.DownstreamForwarded != wantDown {
				t.Fatalf("forwarded up %d down %d, want %d and %d (%+v)",
					s.UpstreamForwarded, s.DownstreamForwarded, wantUp, wantDown, s)
			}
			if s.Open != 2 || s.Accepted != 2 {
				t.Fatalf("connections %+v, want 2 accepted and still open", s)
			}
		})
	}
}

func TestBlackHoleHoldsCloseUntilHeal(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	conn := dial(t, p.Addr())
	send(t, conn, "x")
	expect(t, conn, "x")
	receive(t, srv.accepted, "server accept")

	p.BlackHole(Upstream)
	send(t, conn, "abc")
	if err := conn.CloseWrite(); err != nil {
		t.Fatalf("close write: %v", err)
	}
	await(t, p, "the close is held", func(s Stats) bool { return s.UpstreamDropped == 3 && s.ClosesHeld == 1 })
	select {
	case r := <-srv.ended:
		t.Fatalf("server saw the end of the stream through a black hole: %+v", r)
	default:
	}

	p.Heal()
	if r := receive(t, srv.ended, "server end"); r.err != nil || r.echoed != 1 {
		t.Fatalf("server ended with %+v, want a clean EOF having received only the 1 byte sent before", r)
	}
	await(t, p, "nothing is held", func(s Stats) bool { return s.ClosesHeld == 0 })
}

func TestResetSeversBothSides(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	conn := dial(t, p.Addr())
	send(t, conn, "hi")
	expect(t, conn, "hi")

	p.Reset()
	if _, err := conn.Read(make([]byte, 1)); !isReset(err) {
		t.Fatalf("client read after Reset: %v, want ECONNRESET", err)
	}
	if r := receive(t, srv.ended, "server end"); !isReset(r.err) {
		t.Fatalf("server ended with %+v, want ECONNRESET", r)
	}
	await(t, p, "no connection is open", func(s Stats) bool { return s.Open == 0 })

	// Reset is one-shot: a new connection works.
	again := dial(t, p.Addr())
	send(t, again, "again")
	expect(t, again, "again")
}

func TestRefuseThenListenAgainOnSamePort(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	open := dial(t, p.Addr())
	send(t, open, "a")
	expect(t, open, "a")
	addr := p.Addr()

	p.Refuse(true)
	p.Refuse(true) // idempotent
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial while refusing: %v, want ECONNREFUSED", err)
	}
	// Connections already open are not touched by Refuse.
	send(t, open, "b")
	expect(t, open, "b")

	p.Refuse(false)
	if err := p.Err(); err != nil {
		t.Fatalf("listen again: %v", err)
	}
	if p.Addr() != addr {
		t.Fatalf("address changed from %s to %s", addr, p.Addr())
	}
	conn := dial(t, addr)
	send(t, conn, "back")
	expect(t, conn, "back")
	if s := p.Stats(); s.Accepted != 2 {
		t.Fatalf("accepted %d, want 2", s.Accepted)
	}
}

func TestLatencyDelaysAndKeepsOrder(t *testing.T) {
	const delay = 40 * time.Millisecond
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	conn := dial(t, p.Addr())
	p.Latency(delay)

	var want bytes.Buffer
	for i := range 50 {
		want.WriteString(strings.Repeat(string(rune('a'+i%26)), i+1))
	}
	start := time.Now()
	go func() { _, _ = conn.Write(want.Bytes()) }()
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	// A lower bound only: each direction holds every chunk for at least delay, so the
	// round trip cannot be shorter however loaded the machine is.
	if elapsed := time.Since(start); elapsed < 2*delay {
		t.Fatalf("round trip took %v, want at least %v", elapsed, 2*delay)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("order or content changed:\n got %q\nwant %q", got, want.Bytes())
	}
}

func TestHealReleasesDelayedChunks(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	conn := dial(t, p.Addr())
	p.Latency(time.Hour)
	send(t, conn, "held")
	await(t, p, "the chunk is held", func(s Stats) bool { return s.UpstreamPending == 4 })
	if s := p.Stats(); s.UpstreamForwarded != 0 {
		t.Fatalf("forwarded %d bytes under an hour of latency", s.UpstreamForwarded)
	}
	p.Heal()
	expect(t, conn, "held")
}

func TestLargeTransferIntact(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	conn := dial(t, p.Addr())
	p.Latency(time.Millisecond)

	rng := rand.New(rand.NewPCG(7, 11))
	payload := make([]byte, 2<<20)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	written := make(chan error, 1)
	go func() {
		rest := payload
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(64<<10))
			if _, err := conn.Write(rest[:n]); err != nil {
				written <- err
				return
			}
			rest = rest[n:]
		}
		written <- nil
	}()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := receive(t, written, "writer result"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("payload corrupted in transit")
	}
}

func TestTargetDownResetsClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()

	p := startProxy(t, dead)
	// The reset can arrive before the client's connect has even returned.
	c, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(guard))
		_, err = c.Read(make([]byte, 1))
	}
	if !isReset(err) {
		t.Fatalf("connection through a proxy to a dead target: %v, want ECONNRESET", err)
	}
	await(t, p, "the dial failure is counted", func(s Stats) bool { return s.DialFailed == 1 && s.Open == 0 })
}

func TestTargetResetIsPassedOn(t *testing.T) {
	srv := startEcho(t)
	p := startProxy(t, srv.addr())
	conn := dial(t, p.Addr())
	send(t, conn, "x")
	expect(t, conn, "x")

	server := receive(t, srv.accepted, "server accept")
	_ = server.SetLinger(0)
	_ = server.Close()
	if _, err := conn.Read(make([]byte, 1)); !isReset(err) {
		t.Fatalf("client read after the target reset: %v, want ECONNRESET", err)
	}
	await(t, p, "the reset is counted", func(s Stats) bool { return s.ResetByPeer == 1 && s.Open == 0 })
}

func TestBlackHoleRejectsUnknownDirection(t *testing.T) {
	p := startProxy(t, "127.0.0.1:1")
	defer func() {
		if recover() == nil {
			t.Fatal("BlackHole(0) did not panic")
		}
	}()
	p.BlackHole(0)
}

func TestStartOnListensOnTheAddressGiven(t *testing.T) {
	srv := startEcho(t)
	// A port known to be free a moment ago: the proxy must take exactly it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := StartOn(addr, srv.addr())
	if err != nil {
		t.Fatalf("StartOn(%s): %v", addr, err)
	}
	defer p.Close()
	if p.Addr() != addr {
		t.Fatalf("Addr %q, want %q", p.Addr(), addr)
	}
	conn := dial(t, p.Addr())
	send(t, conn, "hi")
	expect(t, conn, "hi")
	if _, err := StartOn(addr, srv.addr()); err == nil {
		t.Fatalf("a second proxy on %s started", addr)
	}
}
