package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// engineDialTimeout bounds connecting to the engine, which runs on the same
// host or next to it: a dial that takes longer means the engine is down.
const engineDialTimeout = 5 * time.Second

// engineCall is one fenced data request in flight to the engine, on a
// connection dialled for it alone. Owning the connection is what makes an
// abort exact: closing it ends this request and no other, at once, and when
// close returns the engine can no longer send anything the agent would read.
// A pooled transport closes an abandoned connection from another goroutine,
// some time later.
type engineCall struct {
	conn      net.Conn
	resp      *http.Response
	stopWatch func() bool // stops closing conn when ctx ends
}

// callEngine sends the request to the engine and reads the response headers.
// When ctx ends (the attempt is aborted or finished) the connection is closed,
// which unblocks any read. The caller must call close.
func (a *Agent) callEngine(ctx context.Context, r *http.Request, body []byte) (*engineCall, error) {
	target := a.engineURLFor(r.URL)
	out, err := http.NewRequestWithContext(ctx, r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the engine request: %w", err)
	}
	copyRequestHeaders(out.Header, r.Header)
	out.Close = true // "Connection: close": the connection belongs to this request only

	conn, err := dialEngine(ctx, target)
	if err != nil {
		return nil, err
	}
	call := &engineCall{conn: conn}
	call.stopWatch = context.AfterFunc(ctx, func() { _ = conn.Close() })
	bw := bufio.NewWriterSize(conn, 16<<10)
	if err := out.Write(bw); err != nil {
		call.close()
		return nil, fmt.Errorf("sending the request to the engine: %w", err)
	}
	if err := bw.Flush(); err != nil {
		call.close()
		return nil, fmt.Errorf("sending the request to the engine: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 32<<10), out)
	if err != nil {
		call.close()
		return nil, fmt.Errorf("reading the engine's response: %w", err)
	}
	call.resp = resp
	return call, nil
}

// close closes the engine connection. When it returns, the connection is
// closed: the engine sees the request abandoned.
func (c *engineCall) close() {
	c.stopWatch()
	_ = c.conn.Close()
}

// dialEngine connects to the engine named by target.
func dialEngine(ctx context.Context, target *url.URL) (net.Conn, error) {
	host := target.Host
	if target.Port() == "" {
		port := "80"
		if target.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(target.Hostname(), port)
	}
	d := &net.Dialer{Timeout: engineDialTimeout}
	var (
		conn net.Conn
		err  error
	)
	if target.Scheme == "https" {
		td := &tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: target.Hostname()}}
		conn, err = td.DialContext(ctx, "tcp", host)
	} else {
		conn, err = d.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to the engine at %s: %w", host, err)
	}
	return conn, nil
}

// engineURLFor maps a request URL on the agent to the engine: the engine's
// base path joined with the request's path, and the request's query.
func (a *Agent) engineURLFor(u *url.URL) *url.URL {
	target := *a.engine
	target.Path = strings.TrimSuffix(a.engine.Path, "/") + u.Path
	target.RawPath = ""
	target.RawQuery = u.RawQuery
	return &target
}
