package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childArgsEnv, when set, turns this test binary into the fencegate command with these
// arguments (separated by newlines), so that a test can signal a real gateway process.
const childArgsEnv = "FENCEGATE_TEST_COMMAND_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, strings.Split(args, "\n"), os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fencegate:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A client that stops reading must not keep a stopping gateway alive: after SIGTERM the
// process exits within shutdown.drain_grace plus a few seconds, and the stalled request's
// upstream is cancelled.
func TestSIGTERMExitsDespiteAStalledClient(t *testing.T) {
	gone := make(chan struct{}, 1)
	pad := strings.Repeat("word ", 40)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		case "/v1/chat/completions":
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for r.Context().Err() == nil {
			if _, err := fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", pad); err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		gone <- struct{}{}
	}))
	defer engine.Close()

	const grace = 2 * time.Second
	cfgPath := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nstore: \"memory:\"\nshutdown: {drain_grace: %s}\npolicy: {client_write_timeout: 10m}\nmodels:\n  - name: m\n    replicas: [{url: %q}]\n", grace, engine.URL)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"=serve\n--config\n"+cfgPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	var url string
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate gateway listening on "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatal("the gateway never said where it listens")
	}

	// The stalled client: a small receive buffer, the headers read, then nothing.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"forever"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stalled client's response: %v %v", resp, err)
	}

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("gateway exited with %v", err)
		}
		t.Logf("exited %v after SIGTERM (grace %v)", time.Since(sent).Round(time.Millisecond), grace)
	case <-time.After(grace + 5*time.Second):
		t.Fatalf("the gateway was still running %v after SIGTERM (grace %v)", grace+5*time.Second, grace)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled request's upstream was never cancelled")
	}
}
