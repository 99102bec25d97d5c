package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// serve starts when its PostgreSQL store refuses the connection (the store given through
// FENCEGATE_STORE, as from a Kubernetes Secret): it listens, /readyz is 200 and says the
// store is not connected, and it stops cleanly. A restart during a store outage is then no
// crash loop.
func TestServeStartsWhileTheStoreRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	t.Setenv(storeEnv, "postgres://postgres@"+refused+"/fencegate?sslmode=disable")
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nauth: {store_keys: false}\nmodels:\n  - name: m\n    replicas: [{url: \"http://" + refused + "\"}]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path, "--log-format", "text"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	admin := ""
	for admin == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate admin listening on "); ok {
			admin = u
		}
	}
	if admin == "" {
		t.Fatalf("serve never listened: %v", <-done)
	}
	go io.Copy(io.Discard, pr)
	resp, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !gjson.GetBytes(body, "store").Exists() || gjson.GetBytes(body, "store.connected").Bool() ||
		!strings.Contains(gjson.GetBytes(body, "store.last_error").String(), "refused") {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "postgres://") {
		t.Errorf("/readyz shows the DSN: %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve ended with %v", err)
	}
}
