package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// Options configures a Client. The zero value is the gateway's configuration for engines.
type Options struct {
	// Dial opens a TCP connection to a replica; nil uses a net.Dialer with DialTimeout and
	// a 30 s TCP keep-alive.
	Dial        DialFunc
	DialTimeout time.Duration // default 5 s
	// TLS is the configuration for https replicas (ServerName is set per replica); nil
	// verifies against the system's roots.
	TLS *tls.Config
	// IdleTimeout closes a kept-alive connection idle this long. Default 4 s: below
	// uvicorn's 5 s keep-alive (vLLM, SGLang), so the gateway closes an idle connection
	// before the engine does rather than racing the engine's close with a new request.
	IdleTimeout time.Duration
	// MaxIdlePerReplica and MaxIdle bound the idle connections kept (default 256, 1024).
	MaxIdlePerReplica int
	MaxIdle           int
	// ReadBufferSize is each connection's own read buffer (default and minimum 4 KiB):
	// response heads and chunk-size lines are read there, and body bytes are read into the
	// caller's buffer whenever it is at least this large, so the buffer stays small.
	ReadBufferSize int
	// MaxHeaderBytes and MaxHeaderFields bound a response head, and separately a chunked
	// body's trailer (default 32 KiB and 100).
	MaxHeaderBytes  int
	MaxHeaderFields int
}

func (o Options) withDefaults() (Options, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"DialTimeout", int64(o.DialTimeout)}, {"IdleTimeout", int64(o.IdleTimeout)},
		{"MaxIdlePerReplica", int64(o.MaxIdlePerReplica)}, {"MaxIdle", int64(o.MaxIdle)},
		{"ReadBufferSize", int64(o.ReadBufferSize)}, {"MaxHeaderBytes", int64(o.MaxHeaderBytes)},
		{"MaxHeaderFields", int64(o.MaxHeaderFields)},
	} {
		if f.v < 0 {
			return o, fmt.Errorf("upstream.Options.%s: %d is negative", f.name, f.v)
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 4 * time.Second
	}
	def(&o.MaxIdlePerReplica, 256)
	def(&o.MaxIdle, 1024)
	def(&o.ReadBufferSize, maxChunkLine)
	def(&o.MaxHeaderBytes, 32<<10)
	def(&o.MaxHeaderFields, 100)
	if o.ReadBufferSize < maxChunkLine {
		return o, fmt.Errorf("upstream.Options.ReadBufferSize: %d is below %d (a chunk-size line must fit)", o.ReadBufferSize, maxChunkLine)
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return o, nil
}

// Client is an HTTP/1.1 client for engines and agents. It exists so that the gateway owns
// what net/http's Transport hides:
//
//   - No request is ever sent twice. The client has no retry of any kind: not on a stale
//     pooled connection, not for an idempotent method, not after a dial. Every failure is
//     reported, with how much of the request was written (Error.Sent), and the failover
//     machine decides.
//   - No goroutine per connection and no hand-off per read: a Response is read in the
//     caller's goroutine, into the caller's buffer, straight from the socket.
//   - Every error is an *Error that ClassifyError maps onto the failure classes of
//     docs/design.md §3.
//
// A connection returns to the pool only when its response was read to the end and both
// sides allowed keep-alive; closing a response early closes its connection, which is how
// the engine learns the request was abandoned.
type Client struct {
	opts Options
	lim  headLimits
	pool *pool
	bufs *bufPool
}

// New returns a Client; an Options field that is negative or too small is an error naming it.
func New(opts Options) (*Client, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Client{
		opts: o,
		lim:  headLimits{maxBytes: o.MaxHeaderBytes, maxFields: o.MaxHeaderFields},
		pool: newPool(o.IdleTimeout, o.MaxIdlePerReplica, o.MaxIdle),
		bufs: newBufPool(o.ReadBufferSize),
	}, nil
}

// CloseIdle closes every idle connection. Connections in use are closed by their
// responses as usual.
func (c *Client) CloseIdle() { c.pool.closeAll() }

// Do sends req and reads the response's status line and header. The body is read with
// the Response's Read, which the caller must Close.
//
// A nil error means the whole request was written. Cancelling ctx interrupts Do and any
// Read of the body at once (the connection is closed); the error then carries ctx.Err().
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	r, err := c.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := r.ReadHead(); err != nil {
		return nil, err
	}
	return r, nil
}

// Send is Do's first half: it writes req and returns its response before anything of it
// was read. ReadHead reads the status line and header; until it has returned nil, the
// response has neither, and its body may not be read. A nil error means the whole request
// was written. A caller that must go on answering other events while the engine is slow
// to answer (a request's owner) calls EnableWake and then ReadHead, which a wake ends with
// ErrWoken and which may be called again.
func (c *Client) Send(ctx context.Context, req *Request) (*Response, error) {
	t, err := parseBase(req.Base)
	if err != nil {
		return nil, err
	}
	// The request is checked before anything is dialled, but a write buffer is held only
	// while a connection is at hand: a dial can wait (a burst of new streams, a far
	// replica), and the buffer goes back as soon as the request is written, not when the
	// head has come.
	inline := req.bodySize() <= inlineBody
	wb, head, err := buildRequest(req, t.host, inline)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		putWriteBuffer(wb)
		return nil, &Error{Op: OpDial, Addr: t.addr, Err: err}
	}
	cn := c.pool.get(req.Base)
	if cn != nil {
		cn.take()
	} else {
		putWriteBuffer(wb)
		if cn, err = c.dial(ctx, req.Base, t); err != nil {
			return nil, &Error{Op: OpDial, Addr: t.addr, Err: err}
		}
		wb, head, _ = buildRequest(req, t.host, inline) // checked above
	}
	r := &Response{ContentLength: -1, c: c, cn: cn, ctx: ctx, addr: t.addr, reuse: !req.Close,
		headPending: true, isHEAD: req.Method == "HEAD"}
	if ctx.Done() != nil {
		r.stop = context.AfterFunc(ctx, cn.abort)
	}
	n, err := write(cn, head, req, inline)
	putWriteBuffer(wb)
	if err != nil {
		sent := SentPart
		if n == 0 {
			sent = SentNothing
		}
		return nil, r.fail(OpWrite, sent, err)
	}
	return r, nil
}

// write writes the request: its head, with a small body appended to it (inline), or else
// the head then a large body's parts straight from the caller's slices, in one writev on a
// TCP connection. It returns the bytes written.
func write(cn *conn, head []byte, req *Request, inline bool) (int, error) {
	if inline {
		return cn.wr.Write(head)
	}
	out := make(net.Buffers, 0, 2+len(req.More))
	out = append(out, head, req.Body)
	for _, p := range req.More {
		if len(p) > 0 {
			out = append(out, p)
		}
	}
	n, err := cn.wr.WriteBuffers(out)
	return int(n), err
}

// dial opens a connection to t, with TLS for an https replica.
func (c *Client) dial(ctx context.Context, key string, t target) (*conn, error) {
	tcp, err := c.opts.Dial(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	nc := tcp
	if t.tls {
		cfg := &tls.Config{}
		if c.opts.TLS != nil {
			cfg = c.opts.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = serverName(t.host)
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(tcp, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			tcp.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		nc = tc
	}
	return newConn(nc, tcp, key, c.bufs), nil
}

// serverName is host without its port and IPv6 brackets.
func serverName(host string) string {
	if i, j := strings.LastIndexByte(host, ':'), strings.LastIndexByte(host, ']'); i > j {
		host = host[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// closedIdle reports whether err, from reading the head of a response of which no byte
// arrived, shows that the engine closed the connection (FIN or reset).
func closedIdle(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
