package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
)

// socketHasBytes reports whether the connection's socket holds a byte to read, without
// reading or waiting.
func socketHasBytes(t *testing.T, cn *conn) bool {
	t.Helper()
	var n int
	err := cn.raw.Read(func(fd uintptr) bool {
		n, _, _ = syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	return err == nil && n > 0
}

// Wait returns once the engine has sent more of the body: then the socket holds it, and
// the Read that follows returns it. It returns at once when the body's bytes are already
// read from the socket, and when the exchange is over; a Wait on an engine that sends
// nothing ends when the request's context does.
func TestResponseWait(t *testing.T) {
	const second = "data: second\n\n"
	next := make(chan struct{})
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if !readRawRequest(rd) {
			return
		}
		streamHeadAndFirstEvent(c)
		select {
		case <-next:
		case <-t.Context().Done():
			return
		}
		fmt.Fprintf(c, "%x\r\n%s\r\n0\r\n\r\n", len(second), second)
	})
	c := newClient(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := c.Do(ctx, postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	cn := resp.cn
	readFirstEvent(t, resp)
	waited := make(chan bool)
	go func() {
		resp.Wait()
		waited <- socketHasBytes(t, cn)
	}()
	close(next)
	if !<-waited {
		t.Fatal("Wait returned before the engine sent anything")
	}
	body, err := readAll(resp, 8<<10)
	if err != nil || string(body) != second {
		t.Fatalf("after Wait: %q, %v", body, err)
	}
	resp.Wait() // the body is over: at once

	// The engine resets the connection: Wait leaves the reset for the Read to report, so it
	// is classified as a reset, not as a close.
	rst := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if readRawRequest(rd) {
			streamHeadAndFirstEvent(c)
			<-next
			reset(c)
		}
	})
	resp, err = c.Do(ctx, postTo(rst.base()))
	if err != nil {
		t.Fatal(err)
	}
	readFirstEvent(t, resp)
	resp.Wait()
	_, err = resp.Read(make([]byte, 8<<10))
	if f := ClassifyError(err); f.Reason != "connection_reset" {
		t.Fatalf("read after a reset: %v, classified %+v", err, f)
	}

	// Nothing comes: the context ends the wait, and the Read after it says why.
	hold := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if readRawRequest(rd) {
			streamHeadAndFirstEvent(c)
			io.Copy(io.Discard, rd) // until the client closes
		}
	})
	resp, err = c.Do(ctx, postTo(hold.base()))
	if err != nil {
		t.Fatal(err)
	}
	readFirstEvent(t, resp)
	go cancel()
	resp.Wait()
	if _, err := resp.Read(make([]byte, 8<<10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after a cancelled wait: %v", err)
	}
}

// Under TLS the socket does not show what the TLS layer has already decrypted, so Wait
// does not wait on it: a stream whose events come in one TLS record, read a few bytes at a
// time with a Wait before every Read, arrives whole.
func TestResponseWaitTLS(t *testing.T) {
	events := strings.Join(sseEvents(8), "")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events) // one write, one flush: one record
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body ends only when the client leaves
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := newClient(t, Options{TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()})
	resp, err := c.Do(context.Background(), postTo(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	if _, ok := resp.cn.nc.(*tls.Conn); !ok {
		t.Fatalf("connection %T is not TLS", resp.cn.nc)
	}
	got := make([]byte, 0, len(events))
	buf := make([]byte, 100)
	for len(got) < len(events) {
		resp.Wait()
		n, err := resp.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != events {
		t.Fatalf("read %q, want %q", got, events)
	}
}
