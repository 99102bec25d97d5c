package faultproxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestCloseLeavesNoGoroutines closes a proxy whose connections are in every state a
// goroutine can wait in: idle, holding a close in a black hole, holding a chunk for
// latency, and refusing with the listener closed; then checks that nothing is left.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	srv := startEcho(t)
	p, err := Start(srv.addr())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}

	idle := dial(t, p.Addr())
	send(t, idle, "idle")
	expect(t, idle, "idle")

	closing := dial(t, p.Addr())
	send(t, closing, "c")
	expect(t, closing, "c")
	p.BlackHole(Upstream)
	if err := closing.CloseWrite(); err != nil {
		t.Fatalf("close write: %v", err)
	}
	await(t, p, "the close is held", func(s Stats) bool { return s.ClosesHeld == 1 })
	p.Heal()
	await(t, p, "the close is passed on", func(s Stats) bool { return s.ClosesHeld == 0 })

	p.BlackHole(Downstream)
	p.Latency(time.Hour)
	delayed := dial(t, p.Addr())
	send(t, delayed, "later")
	p.Refuse(true)

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.Await(context.Background(), func(s Stats) bool { return false }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Await after Close: %v, want ErrClosed", err)
	}
	if s := p.Stats(); s.Open != 0 {
		t.Fatalf("%d connections open after Close", s.Open)
	}
	for _, c := range []interface{ Close() error }{idle, closing, delayed} {
		_ = c.Close()
	}
	srv.close()
}
