package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// inBubble runs test in a synctest bubble against a net/http engine on an in-memory
// network, with a client made from opts (its Dial replaced).
func inBubble(t *testing.T, opts Options, test func(c *Client, network *pipeNet)) {
	synctest.Test(t, func(t *testing.T) {
		network := newPipeNet()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "ok")
		})}
		go srv.Serve(network)
		opts.Dial = network.Dial
		c, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		test(c, network)
		c.CloseIdle()
		srv.Close()
		network.Close()
		synctest.Wait()
	})
}

func roundTrip(t *testing.T, c *Client) {
	t.Helper()
	resp, err := c.Do(context.Background(), postTo("http://engine.test:8000"))
	if err != nil {
		t.Fatal(err)
	}
	if body, err := readAll(resp, 8<<10); err != nil || string(body) != "ok" {
		t.Fatalf("%q, %v", body, err)
	}
}

// An idle connection is reused until it has been idle for IdleTimeout (4 s, below
// uvicorn's 5 s), and closed then, by the pool itself.
func TestPoolIdleTimeout(t *testing.T) {
	inBubble(t, Options{}, func(c *Client, network *pipeNet) {
		const key = "http://engine.test:8000"
		roundTrip(t, c)
		time.Sleep(4*time.Second - time.Millisecond)
		roundTrip(t, c)
		if d := network.dials.Load(); d != 1 {
			t.Fatalf("%d dials, want 1: a connection idle for less than 4 s is reused", d)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if n := c.pool.count(key); n != 0 {
			t.Fatalf("%d idle connections after 4 s idle, want 0", n)
		}
		roundTrip(t, c)
		if d := network.dials.Load(); d != 2 {
			t.Fatalf("%d dials, want 2", d)
		}
	})
}

// closeCountingConn counts the closes of the connections a dial made.
type closeCountingConn struct {
	net.Conn
	closes *atomic.Int32
	once   atomic.Bool
}

func (c *closeCountingConn) Close() error {
	if c.once.CompareAndSwap(false, true) {
		c.closes.Add(1)
	}
	return c.Conn.Close()
}

// The pool keeps at most MaxIdlePerReplica connections to one replica and MaxIdle in
// all, and closes the others as their responses end.
func TestPoolLimits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		bases      []string
		wantIdle   []int
		wantClosed int32
	}{
		{"per replica", Options{MaxIdlePerReplica: 2}, []string{"http://a.test", "http://a.test", "http://a.test"}, []int{2}, 1},
		{"in all", Options{MaxIdle: 2}, []string{"http://a.test", "http://b.test", "http://b.test"}, []int{1, 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closes atomic.Int32
			inBubble(t, tc.opts, func(c *Client, network *pipeNet) {
				dial := c.opts.Dial
				c.opts.Dial = func(ctx context.Context, n, a string) (net.Conn, error) {
					nc, err := dial(ctx, n, a)
					if err != nil {
						return nil, err
					}
					return &closeCountingConn{Conn: nc, closes: &closes}, nil
				}
				var resps []*Response
				for _, base := range tc.bases {
					resp, err := c.Do(context.Background(), postTo(base))
					if err != nil {
						t.Fatal(err)
					}
					resps = append(resps, resp)
				}
				for _, resp := range resps {
					if _, err := readAll(resp, 8<<10); err != nil {
						t.Fatal(err)
					}
				}
				for i, base := range []string{"http://a.test", "http://b.test"}[:len(tc.wantIdle)] {
					if n := c.pool.count(base); n != tc.wantIdle[i] {
						t.Fatalf("%d idle connections to %s, want %d", n, base, tc.wantIdle[i])
					}
				}
				if n := closes.Load(); n != tc.wantClosed {
					t.Fatalf("%d connections closed, want %d", n, tc.wantClosed)
				}
			})
		})
	}
}

// Options are checked, naming the field.
func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{IdleTimeout: -1}, "upstream.Options.IdleTimeout: -1 is negative"},
		{Options{MaxHeaderFields: -3}, "upstream.Options.MaxHeaderFields: -3 is negative"},
		{Options{ReadBufferSize: 1024}, "upstream.Options.ReadBufferSize: 1024 is below 4096 (a chunk-size line must fit)"},
	} {
		if _, err := New(tc.opts); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}
}
