package gateway_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
)

// brokenWriteDialer dials real TCP connections; while armed for an address, every request
// to it fails as it is written, before one byte leaves: what a kept-alive connection that
// the engine's host reset while it sat idle gives back. Control calls are never touched.
type brokenWriteDialer struct {
	mu   sync.Mutex
	addr string
}

func (d *brokenWriteDialer) arm(addr string) {
	d.mu.Lock()
	d.addr = addr
	d.mu.Unlock()
}

func (d *brokenWriteDialer) armed(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr == addr
}

func (d *brokenWriteDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &brokenWriteConn{Conn: c, d: d, addr: addr}, nil
}

type brokenWriteConn struct {
	net.Conn
	d    *brokenWriteDialer
	addr string
}

func (c *brokenWriteConn) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("POST /v1/")) && c.d.armed(c.addr) {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	}
	return c.Conn.Write(b)
}

// A request of which not one byte was written cannot have reached its engine: it is rerun
// at no cost, and its replica is not blamed. Ten such requests in a row on the replica the
// prompt prefers (twice eject_after) neither mark it dead nor eject it, and it never sees
// one of them; each is answered by the other replica.
func TestUnsentRequestIsAFreeRerun(t *testing.T) {
	d := &brokenWriteDialer{}
	e := newEnv(t, envOptions{dial: d.Dial})
	ctx := testCtx(t)
	p := chatParams(ejectPrompt, 4)
	first := e.stream(ctx, p)
	if first.err != nil {
		t.Fatal(first.err)
	}
	bad := e.record(first.requestID).Attempts[0].Replica
	good, badSim := "sim-2", e.sims[0]
	if bad == "sim-2" {
		good, badSim = "sim-1", e.sims[1]
	}
	d.arm(strings.TrimPrefix(badSim.URL(), "http://"))
	before := len(badSim.Records())
	for i := range 2 * config.DefaultEjectAfter {
		r := e.stream(ctx, p)
		if r.err != nil || r.content == "" {
			t.Fatalf("request %d: %v (content %q)", i+1, r.err, r.content)
		}
		rec := e.record(r.requestID)
		if rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[1].Replica != good {
			t.Fatalf("request %d: journal %+v, want 2 attempts, the last on %s", i+1, rec, good)
		}
		if a := rec.Attempts[0]; a.Replica != bad || a.Failure != "dead" || a.EndReason != "connection_reset" {
			t.Fatalf("request %d: first attempt %+v", i+1, a)
		}
	}
	if got := len(badSim.Records()) - before; got != 0 {
		t.Fatalf("%s received %d requests that were never written", bad, got)
	}
	if r := e.replicaOf(bad); r["state"] != "healthy" {
		t.Fatalf("/readyz shows %s as %v", bad, r)
	}
	if m := e.metrics(); strings.Contains(m, `fencegate_replica_ejections_total{model="sim-model",replica="`+bad+`"}`) {
		t.Fatalf("%s was ejected:\n%s", bad, m)
	}
}
