package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

func TestClassifyRefusedAndReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := NewClient(time.Second, nil)
	_, err = c.Get("http://" + addr + "/")
	if f := ClassifyError(err); f.Class != failover.Dead || !f.Dial || f.Reason != "connection_refused" {
		t.Fatalf("refused classified as %+v (%v)", f, err)
	}

	// A server that accepts and resets the connection.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 1024)
		conn.Read(buf)
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}()
	_, err = c.Get("http://" + ln.Addr().String() + "/")
	if f := ClassifyError(err); f.Class != failover.Dead || f.Dial {
		t.Fatalf("reset classified as %+v (%v)", f, err)
	}
}

func TestClassifyErrorsAndStatuses(t *testing.T) {
	if f := ClassifyError(io.ErrUnexpectedEOF); f.Reason != "connection_closed" {
		t.Fatalf("%+v", f)
	}
	if f := ClassifyError(context.DeadlineExceeded); f.Class != failover.Uncertain {
		t.Fatalf("%+v", f)
	}
	if f := ClassifyError(errors.New("weird")); f.Class != failover.Dead {
		t.Fatalf("%+v", f)
	}
	for status, want := range map[int]failover.FailureClass{
		429: failover.Overloaded, 503: failover.Overloaded, 500: failover.Dead, 502: failover.Dead,
		400: failover.Rejected, 404: failover.Rejected, 422: failover.Rejected, 204: failover.Dead, 302: failover.Dead,
	} {
		if f := ClassifyStatus(status); f.Class != want {
			t.Errorf("status %d → %v, want %v", status, f.Class, want)
		}
	}
	if ClassifyStatus(http.StatusInternalServerError).Reason != "engine_status_500" {
		t.Fatal("reason must carry the status")
	}
}
