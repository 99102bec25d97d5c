package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeKeyPair writes a fresh self-signed ECDSA certificate and its key into dir.
func writeKeyPair(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSNeedsBothFilesReadableAndMatching(t *testing.T) {
	dir := t.TempDir()
	certA, keyA := writeKeyPair(t, dir, "a")
	_, keyB := writeKeyPair(t, dir, "b")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	base := "models:\n  - name: m\n    replicas: [{url: 'http://127.0.0.1:9001'}]\n"
	tlsBlock := func(cert, key string) string {
		return fmt.Sprintf("tls: {cert_file: %q, key_file: %q}\n", cert, key)
	}

	c, err := Parse([]byte(base + tlsBlock(certA, keyA)))
	if err != nil {
		t.Fatalf("a matching pair: %v", err)
	}
	if !c.TLS.Enabled() {
		t.Fatal("TLS set but not enabled")
	}
	if c, err := Parse([]byte(base)); err != nil || c.TLS.Enabled() {
		t.Fatalf("no tls block: %v, enabled %v", err, c.TLS.Enabled())
	}

	cases := []struct{ name, yaml, field string }{
		{"cert only", fmt.Sprintf("tls: {cert_file: %q}\n", certA), "tls.key_file: required"},
		{"key only", fmt.Sprintf("tls: {key_file: %q}\n", keyA), "tls.cert_file: required"},
		{"missing cert", tlsBlock(missing, keyA), "tls.cert_file"},
		{"missing key", tlsBlock(certA, missing), "tls.key_file"},
		{"not a certificate", tlsBlock(garbage, keyA), "tls.cert_file"},
		{"another key", tlsBlock(certA, keyB), "tls.key_file"},
		{"unknown field", "tls: {cert_file: a, key_file: b, ca_file: c}\n", "ca_file"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(base + tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v does not name %q", tc.name, err, tc.field)
		}
	}
}
