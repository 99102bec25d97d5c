package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/openai/openai-go/v3"
)

// failingDialer dials real TCP connections; the first connection that carries a chat
// request after arm gets err on its next read instead of the engine's answer: the
// transport sees that error before any byte of the response. Control calls (renewals,
// cancels, probes) are never touched.
type failingDialer struct {
	mu  sync.Mutex
	err error // armed error, taken by the first chat request
}

func (d *failingDialer) arm(err error) {
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
}

func (d *failingDialer) take() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.err
	d.err = nil
	return err
}

func (d *failingDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &failingConn{Conn: c, d: d}, nil
}

type failingConn struct {
	net.Conn
	d *failingDialer

	mu  sync.Mutex
	err error
}

func (c *failingConn) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("POST /v1/")) {
		if err := c.d.take(); err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
		}
	}
	return c.Conn.Write(b)
}

func (c *failingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err // the engine's bytes never reach the transport
	}
	return n, err
}

// readErr is err as the kernel reports it on a TCP read.
func readErr(errno syscall.Errno) error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", errno)}
}

// transportCases are the transport errors an attempt can meet before any output, and
// whether they prove that the engine stopped.
var transportCases = []struct {
	name    string
	err     error
	failure string // the attempt's class in the journal
	reason  string
}{
	{"reset by the engine", readErr(syscall.ECONNRESET), "dead", "connection_reset"},
	{"closed by the engine", io.EOF, "dead", "connection_closed"},
	{"tcp timeout", readErr(syscall.ETIMEDOUT), "uncertain", "tcp_timeout"},
	{"host unreachable", readErr(syscall.EHOSTUNREACH), "uncertain", "host_unreachable"},
	{"i/o deadline", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, "uncertain", "timeout"},
	{"unknown error", errors.New("something no one anticipated"), "uncertain", "transport_error"},
}

// Direct mode: an attempt is rerun only when its engine is proven stopped. A timeout or an
// unknown error leaves the engine possibly decoding, so the request is not rerun: the
// client is told why and that it may retry.
func TestTransportErrorsDirectMode(t *testing.T) {
	for _, tc := range transportCases {
		t.Run(tc.name, func(t *testing.T) {
			d := &failingDialer{}
			e := newEnv(t, envOptions{dial: d.Dial})
			d.arm(tc.err)
			r := e.stream(testCtx(t), chatParams("transport "+tc.name, 6))
			rec := e.record(r.requestID)
			if len(rec.Attempts) == 0 || rec.Attempts[0].Failure != tc.failure || rec.Attempts[0].EndReason != tc.reason {
				t.Fatalf("journal %+v", rec)
			}
			if tc.failure == "dead" {
				if r.err != nil || rec.Outcome != "completed" || len(rec.Attempts) != 2 {
					t.Fatalf("a proven death must be rerun: %v, journal %+v", r.err, rec)
				}
				return
			}
			var apiErr *openai.Error
			if !errors.As(r.err, &apiErr) || apiErr.StatusCode != 504 || apiErr.Code != "upstream_unresponsive" {
				t.Fatalf("client got %v", r.err)
			}
			if rec.Outcome != "failed" || len(rec.Attempts) != 1 || e.totalSimRequests() != 1 {
				t.Fatalf("an unproven death was rerun: journal %+v, engine requests %d", rec, e.totalSimRequests())
			}
		})
	}
}

// Fenced mode: the same errors on the gateway→agent connection. A proven death is rerun
// at once; an uncertain attempt is fenced by its agent first (cancel acknowledged), then
// rerun: either way the client gets one complete answer, from the other replica.
func TestTransportErrorsFencedMode(t *testing.T) {
	for _, tc := range transportCases {
		t.Run(tc.name, func(t *testing.T) {
			d := &failingDialer{}
			f := newFencedEnvWith(t, fencedOptions{dial: d.Dial})
			d.arm(tc.err)
			p := chatParams("fenced transport "+tc.name, 6)
			r := f.stream(testCtx(t), p)
			rec := f.record(r.requestID)
			if r.err != nil || rec.Outcome != "completed" || len(rec.Attempts) != 2 ||
				rec.Attempts[0].Failure != tc.failure || rec.Attempts[0].EndReason != tc.reason {
				t.Fatalf("stream %v, journal %+v", r.err, rec)
			}
			first, second := 0, 1
			if rec.Attempts[1].Replica == "sim-1" {
				first, second = 1, 0
			}
			if want := f.direct(second, p); r.content != want {
				t.Fatalf("client saw %q, want the second replica's answer %q", r.content, want)
			}
			if tc.failure == "uncertain" {
				// The rerun waited for the proof: the agent had ended the first attempt.
				info := f.agentAttempt(first, rec.Attempts[0].ID)
				if !info.Ended || info.EndedAt.After(rec.Attempts[1].StartedAt) {
					t.Fatalf("first attempt ended on its agent at %v, the rerun started at %v", info.EndedAt, rec.Attempts[1].StartedAt)
				}
			}
		})
	}
}
