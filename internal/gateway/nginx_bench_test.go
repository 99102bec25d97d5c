package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// startNginx runs nginx as a plain streaming reverse proxy in front of target, the
// baseline the gateway's added latency is compared with. The benchmark is skipped when
// nginx is not installed.
func startNginx(b *testing.B, target string) string {
	b.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		b.Skip("nginx is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := b.TempDir()
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fcgi; uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  upstream engine { server %[2]s; keepalive 64; }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`, dir, target, addr)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", path, "-p", dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// SIGTERM, not SIGKILL: the master then stops its workers, which SIGKILL would orphan.
	b.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 100 {
			b.Fatalf("nginx did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // waiting for an external process to listen
	}
	return "http://" + addr
}

// BenchmarkStreamVsNginx compares direct, nginx and the gateway in one run.
func BenchmarkStreamVsNginx(b *testing.B) {
	for _, tokens := range []int{16, 256} {
		e := newEnv(b, envOptions{replicas: 1})
		ngx := startNginx(b, e.sims[0].URL()[len("http://"):])
		b.Run(fmt.Sprintf("direct/tokens=%d", tokens), func(b *testing.B) { benchStream(b, e.sims[0].URL(), tokens) })
		b.Run(fmt.Sprintf("nginx/tokens=%d", tokens), func(b *testing.B) { benchStream(b, ngx, tokens) })
		b.Run(fmt.Sprintf("gateway/tokens=%d", tokens), func(b *testing.B) { benchStream(b, e.srv.URL, tokens) })
	}
}
