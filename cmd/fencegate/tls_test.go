package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// servedCert makes a new HTTPS request to the gateway, trusting only want, and returns the
// certificate the gateway presented. Each call uses a new transport: no connection and no
// TLS session is reused, so every call is a full handshake.
func servedCert(t *testing.T, url string, want testCert) (*x509.Certificate, error) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(want.leaf)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url + "/healthz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /healthz: %s", resp.Status)
	}
	if resp.TLS.NegotiatedProtocol == "h2" {
		return nil, fmt.Errorf("the gateway negotiated HTTP/2")
	}
	return resp.TLS.PeerCertificates[0], nil
}

// serve with tls: answers over HTTPS with the configured certificate, and a new connection
// gets the new certificate once the files were replaced and the reloader looked at them.
func TestServeTLSReloadsTheCertificate(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	saved := tlsNow
	tlsNow = clock.Now
	defer func() { tlsNow = saved }()

	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first, second, third := newTestCert(t, "first"), newTestCert(t, "second"), newTestCert(t, "third")
	first.write(t, certFile, keyFile)
	cfgPath := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nstore: \"memory:\"\ntls: {cert_file: %q, key_file: %q}\nmodels:\n  - name: m\n    replicas: [{url: \"http://127.0.0.1:1\"}]\n", certFile, keyFile)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfgPath}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var url string
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate gateway listening on "); ok {
			url = u
			break
		}
	}
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the gateway says it listens on %q: %v", url, <-done)
	}
	go io.Copy(io.Discard, pr)

	expect := func(step string, want testCert) {
		t.Helper()
		got, err := servedCert(t, url, want)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if !got.Equal(want.leaf) {
			t.Fatalf("%s: served %q, want %q", step, got.Subject.CommonName, want.leaf.Subject.CommonName)
		}
	}
	expect("at start", first)

	// Renewed by renaming new files over the old ones. Within the check interval the cached
	// certificate is still served; the first handshake after it serves the new one.
	second.write(t, certFile, keyFile)
	expect("replaced, checked a moment ago", first)
	clock.Advance(certCheckEvery)
	expect("replaced, check due", second)

	// Half a renewal (a new certificate, the old key) does not load: the previous
	// certificate stays in service, and the pair is taken once the key follows, here
	// written in place rather than renamed.
	replaceFile(t, certFile, third.certPEM)
	clock.Advance(certCheckEvery)
	expect("certificate without its key", second)
	if err := os.WriteFile(keyFile, third.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(certCheckEvery)
	expect("key followed", third)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve ended with %v", err)
	}
}

// A reloader that looked recently does not look again; files that vanish for a moment (in
// the middle of a replacement) leave the current certificate in service.
func TestCertReloaderCachesItsLook(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	saved := tlsNow
	tlsNow = clock.Now
	defer func() { tlsNow = saved }()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a, b := newTestCert(t, "a"), newTestCert(t, "b")
	a.write(t, certFile, keyFile)
	var logs bytes.Buffer
	r, err := newCertReloader(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	leaf := func() *x509.Certificate {
		c, err := r.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf
	}
	if !leaf().Equal(a.leaf) {
		t.Fatal("not the first certificate")
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	clock.Advance(certCheckEvery)
	if !leaf().Equal(a.leaf) {
		t.Fatal("a missing key file dropped the certificate")
	}
	b.write(t, certFile, keyFile)
	clock.Advance(certCheckEvery / 2)
	if !leaf().Equal(a.leaf) {
		t.Fatal("looked again within the interval")
	}
	clock.Advance(certCheckEvery / 2)
	if !leaf().Equal(b.leaf) {
		t.Fatal("the renewed certificate was not loaded")
	}
	if !strings.Contains(logs.String(), "certificate reloaded") {
		t.Fatalf("no reload logged: %s", logs.String())
	}
	if _, err := newCertReloader(certFile, filepath.Join(dir, "absent.key"), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "tls.key_file") {
		t.Fatalf("a missing key at start: %v", err)
	}
}
