package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The benchmarks stream an SSE answer — 64 events of about 150 bytes, flushed one by one,
// then [DONE] — from a net/http engine on loopback, through net/http's Transport as
// NewClient configures it and through Client, each read to its end with an 8 KiB buffer
// as the gateway's reader does. The engine runs in a child process (this test binary,
// started with benchEngineEnv set), so the process's CPU time (getrusage) is the client's
// alone; it is reported per stream as cpu-µs/op.
//
//	go test -run '^$' -bench Stream -benchmem -benchtime 2000x -count 3 ./internal/upstream

const (
	benchEngineEnv = "FENCEGATE_UPSTREAM_BENCH_ENGINE"
	benchBaseEnv   = "FENCEGATE_UPSTREAM_BENCH_BASE"
)

// benchRequestBody is a chat request of about 300 bytes.
var benchRequestBody = []byte(`{"model":"m","stream":true,"max_tokens":64,"stream_options":{"include_usage":true},` +
	`"messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Write a short poem about load balancers and the engines behind them, in four lines."}]}`)

// serveBenchEngine is the child process: it serves the stream on loopback, prints its
// address, and exits when its standard input closes.
func serveBenchEngine() {
	events := sseEvents(64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if r.URL.Path == "/hold" {
			// An open stream: the first event, then silence until the client leaves.
			io.WriteString(w, events[0])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		for _, ev := range events {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	})}
	go srv.Serve(ln)
	fmt.Println(ln.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

var benchEngine struct {
	once  sync.Once
	base  string
	err   error
	stdin io.WriteCloser // the engine exits when it is closed, with this process
}

// startBenchEngine starts the engine process once for all benchmarks of the run. It ends
// with the test binary: its standard input is this process's pipe. With benchBaseEnv set,
// the engine at that base URL is used instead (one started by hand, say, to count the
// client's system calls alone).
func startBenchEngine(b *testing.B) string {
	if base := os.Getenv(benchBaseEnv); base != "" {
		return base
	}
	benchEngine.once.Do(func() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), benchEngineEnv+"=1")
		cmd.Stderr = os.Stderr
		if benchEngine.stdin, benchEngine.err = cmd.StdinPipe(); benchEngine.err != nil {
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			benchEngine.err = err
			return
		}
		if err := cmd.Start(); err != nil {
			benchEngine.err = err
			return
		}
		addr, err := bufio.NewReader(out).ReadString('\n')
		benchEngine.base, benchEngine.err = "http://"+strings.TrimSpace(addr), err
	})
	if benchEngine.err != nil {
		b.Fatal(benchEngine.err)
	}
	return benchEngine.base
}

// streamer sends one request and reads its answer to the end into buf.
type streamer func(ctx context.Context, buf []byte) (streamRead, error)

// streamRead is what reading a stream took: its bytes, and the Reads that returned some
// (each one a hand-over from the gateway's reader to the request's owner).
type streamRead struct {
	bytes, reads int
}

func readStream(body io.Reader, buf []byte) (streamRead, error) {
	var s streamRead
	for {
		n, err := body.Read(buf)
		s.bytes += n
		if n > 0 {
			s.reads++
		}
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return s, err
		}
	}
}

// opener opens a stream from /hold and reads its first event into buf; close ends it.
type opener func(ctx context.Context, buf []byte) (close func(), err error)

func netHTTPStreamer(base string) streamer {
	c := NewClient(time.Second, nil)
	return func(ctx context.Context, buf []byte) (streamRead, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(benchRequestBody)))
		if err != nil {
			return streamRead{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := c.Do(req)
		if err != nil {
			return streamRead{}, err
		}
		defer resp.Body.Close()
		return readStream(resp.Body, buf)
	}
}

func ownStreamer(base string) streamer {
	c, err := New(Options{DialTimeout: time.Second})
	if err != nil {
		panic(err)
	}
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}
	return func(ctx context.Context, buf []byte) (streamRead, error) {
		resp, err := c.Do(ctx, &Request{Method: http.MethodPost, Base: base, Path: "/v1/chat/completions",
			Header: header, Body: benchRequestBody})
		if err != nil {
			return streamRead{}, err
		}
		defer resp.Close()
		return readStream(resp, buf)
	}
}

func netHTTPOpener(base string) opener {
	c := NewClient(time.Second, nil)
	return func(ctx context.Context, buf []byte) (func(), error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/hold", strings.NewReader(string(benchRequestBody)))
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		if _, err := resp.Body.Read(buf); err != nil {
			resp.Body.Close()
			return nil, err
		}
		return func() { resp.Body.Close() }, nil
	}
}

func ownOpener(base string) opener {
	c, err := New(Options{DialTimeout: time.Second})
	if err != nil {
		panic(err)
	}
	return func(ctx context.Context, buf []byte) (func(), error) {
		resp, err := c.Do(ctx, &Request{Method: http.MethodPost, Base: base, Path: "/hold", Body: benchRequestBody})
		if err != nil {
			return nil, err
		}
		if _, err := resp.Read(buf); err != nil {
			resp.Close()
			return nil, err
		}
		return func() { resp.Close() }, nil
	}
}

// benchClients are the clients compared, by name.
var benchClients = []struct {
	name   string
	new    func(base string) streamer
	opener func(base string) opener
}{
	{"net-http", netHTTPStreamer, netHTTPOpener},
	{"own", ownStreamer, ownOpener},
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStreams runs b.N streams, parallel at a time, and reports the CPU time per stream.
func benchStreams(b *testing.B, s streamer, parallel int) {
	want := len(strings.Join(sseEvents(64), ""))
	var reads atomic.Int64
	check := func(s streamRead, err error) {
		if err != nil || s.bytes != want {
			b.Fatalf("stream of %d bytes (want %d): %v", s.bytes, want, err)
		}
		reads.Add(int64(s.reads))
	}
	check(s(context.Background(), make([]byte, 8<<10))) // a kept-alive connection first
	reads.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	if parallel == 1 {
		buf := make([]byte, 8<<10)
		for i := 0; i < b.N; i++ {
			check(s(context.Background(), buf))
		}
	} else {
		b.SetParallelism(parallel)
		b.RunParallel(func(pb *testing.PB) {
			buf := make([]byte, 8<<10)
			for pb.Next() {
				check(s(context.Background(), buf))
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(reads.Load())/float64(b.N), "reads/op")
}

// One stream at a time.
func BenchmarkStream(b *testing.B) {
	base := startBenchEngine(b)
	for _, c := range benchClients {
		b.Run(c.name, func(b *testing.B) { benchStreams(b, c.new(base), 1) })
	}
}

// 64 streams at once (SetParallelism × GOMAXPROCS goroutines, 32 × 2 on the reference
// machine).
func BenchmarkStreamParallel(b *testing.B) {
	base := startBenchEngine(b)
	for _, c := range benchClients {
		b.Run(c.name, func(b *testing.B) { benchStreams(b, c.new(base), 32) })
	}
}

// The memory an open stream holds on the client side: heap and goroutine stacks, after a
// collection, with 256 streams open, each having read its first event (the reader's own
// buffer, the gateway's, is not counted). Reported as B/stream; run with -benchtime 1x.
func BenchmarkOpenStreamMemory(b *testing.B) {
	base := startBenchEngine(b)
	const streams = 256
	for _, c := range benchClients {
		if c.opener == nil {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			open := c.opener(base)
			for i := 0; i < b.N; i++ {
				before := liveBytes()
				closers := make([]func(), 0, streams)
				for range streams {
					closeFn, err := open(context.Background(), make([]byte, 8<<10))
					if err != nil {
						b.Fatal(err)
					}
					closers = append(closers, closeFn)
				}
				b.ReportMetric(float64(liveBytes()-before)/streams, "B/stream")
				for _, closeFn := range closers {
					closeFn()
				}
			}
		})
	}
}

// liveBytes is the heap in use and the goroutine stacks, after a collection.
func liveBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}
