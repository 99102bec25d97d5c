package llamatest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ServerEnv names the llama-server program the tests run (scripts/install-llama-server
// prints one).
const ServerEnv = "FENCEGATE_LLAMA_SERVER"

// ModelName is the name the servers serve the tiny model under (their --alias).
const ModelName = "tiny-llama"

// Binary returns the llama-server named by FENCEGATE_LLAMA_SERVER. Without one the test
// is skipped on a developer's machine, and fails under CI (CI set): there the tests
// against the real engine are part of what must pass, and a missing binary must not
// quietly turn them off.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(ServerEnv)
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set under CI; run scripts/install-llama-server and export its output", ServerEnv)
		}
		t.Skipf("%s is not set (scripts/install-llama-server prints a path to set it to)", ServerEnv)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v", ServerEnv, err)
	}
	return path
}

// Options shape the servers Start runs.
type Options struct {
	// Seed is the tiny model's seed (default 1). Servers of one Start share the model.
	Seed uint64
	// CtxPerSlot is each slot's context in tokens (default 4096, the model's own). At
	// about 2 ms per token near its end, an answer that fills it takes seconds: long
	// enough for a test to act while it is being generated.
	CtxPerSlot int
	// Parallel is the number of slots, -np (default 2).
	Parallel int
	// Args are added to the command line.
	Args []string
}

// Server is one llama-server process on loopback.
type Server struct {
	Name string
	URL  string

	cmd  *exec.Cmd
	log  *tailBuffer
	done chan struct{} // closed when the process has exited
}

// Start runs n llama-server processes with the tiny model, each on its own free loopback
// port with metrics and slots enabled, and returns once every one answers /health with
// 200. They are killed when the test ends; a failed test logs the end of their output.
func Start(t testing.TB, n int, o Options) []*Server {
	t.Helper()
	bin := Binary(t)
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.CtxPerSlot == 0 {
		o.CtxPerSlot = trainCtx
	}
	if o.Parallel == 0 {
		o.Parallel = 2
	}
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := NewModel(o.Seed).WriteFile(model); err != nil {
		t.Fatal(err)
	}
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = startOne(t, bin, model, fmt.Sprintf("llama-%d", i+1), o)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return servers
}

// startOne starts one server, on a new port if the one it was given was taken meanwhile.
func startOne(t testing.TB, bin, model, name string, o Options) (*Server, error) {
	var err error
	for range 3 {
		var s *Server
		if s, err = launch(t, bin, model, name, o); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func launch(t testing.TB, bin, model, name string, o Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--model", model,
		"--alias", ModelName,
		"--host", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--ctx-size", strconv.Itoa(o.CtxPerSlot * o.Parallel),
		"--parallel", strconv.Itoa(o.Parallel),
		"--no-kv-unified", // each slot its own CtxPerSlot, whatever the others hold
		"--threads", "1",  // two servers and the tests share two cores
		"--seed", "1",
		"--metrics",
		"--slots",
		"--fit", "off", // the sizes are given; nothing to adjust to free memory
		"--cache-ram", "0", // no host-memory prompt cache beyond the slots' own
		"--no-warmup",
	}
	args = append(args, o.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = engineEnv()
	s := &Server{Name: name, URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, log: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("%s (%s) output, last part:\n%s", s.Name, s.URL, s.log.String())
		}
	})
	if err := s.waitHealthy(60 * time.Second); err != nil {
		s.Kill()
		return nil, fmt.Errorf("%s: %w\n%s", s.Name, err, s.log.String())
	}
	return s, nil
}

// engineEnv is this process's environment without llama.cpp's LLAMA_ARG_* settings, which
// would override the command line's choices.
func engineEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LLAMA_ARG_") {
			env = append(env, kv)
		}
	}
	return env
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitHealthy polls /health until it answers 200 (the model is loaded), the process
// exits, or the limit passes.
func (s *Server) waitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("exited before it was healthy")
		default:
		}
		if resp, err := c.Get(s.URL + "/health"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not healthy after %v", limit)
}

// Kill ends the process with SIGKILL, as a crash would, and waits until it is gone: its
// sockets are closed by the kernel, so connections to it are reset or refused.
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	<-s.done
}

// Freeze stops the process with SIGSTOP: it holds its connections and answers nothing,
// as a hung engine does, until it is killed.
func (s *Server) Freeze() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Exited tells whether the process has ended.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// PID is the process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Log returns the end of the process's output.
func (s *Server) Log() string { return s.log.String() }

// Metrics reads /metrics into name → value for the samples without labels (llama.cpp's
// own are all such).
func (s *Server) Metrics(ctx context.Context) (map[string]float64, error) {
	body, err := s.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// Slot is what /slots says of one slot.
type Slot struct {
	ID           int  `json:"id"`
	NCtx         int  `json:"n_ctx"`
	IsProcessing bool `json:"is_processing"`
	IDTask       int  `json:"id_task"`
}

// Slots reads /slots.
func (s *Server) Slots(ctx context.Context) ([]Slot, error) {
	body, err := s.get(ctx, "/slots")
	if err != nil {
		return nil, err
	}
	var slots []Slot
	if err := json.Unmarshal(body, &slots); err != nil {
		return nil, fmt.Errorf("/slots: %w: %s", err, body)
	}
	return slots, nil
}

// Busy counts the slots that are processing a task.
func (s *Server) Busy(ctx context.Context) (int, error) {
	slots, err := s.Slots(ctx)
	n := 0
	for _, sl := range slots {
		if sl.IsProcessing {
			n++
		}
	}
	return n, err
}

// WaitSlots polls /slots until cond holds of the number of busy slots, or ctx ends.
// The engine takes and releases slots on its own thread (a slot is freed after the
// engine notices a closed connection), so there is no event to wait for; the poll is
// bounded by ctx.
func (s *Server) WaitSlots(ctx context.Context, cond func(busy int) bool) (int, error) {
	for {
		busy, err := s.Busy(ctx)
		if err == nil && cond(busy) {
			return busy, nil
		}
		select {
		case <-ctx.Done():
			return busy, fmt.Errorf("%s: %d slots busy when %w (last error %v)", s.Name, busy, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WaitMetric polls /metrics until cond holds of the named metric's value, or ctx ends
// (see WaitSlots for why it polls).
func (s *Server) WaitMetric(ctx context.Context, name string, cond func(v float64) bool) (float64, error) {
	for {
		m, err := s.Metrics(ctx)
		v := m[name]
		if err == nil && cond(v) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%s: %s is %v when %w (last error %v)", s.Name, name, v, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *Server) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if over := len(b.b) - b.max; over > 0 {
		b.b = append(b.b[:0], b.b[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}
