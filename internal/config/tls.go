package config

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"os"
)

// TLS makes the gateway serve HTTPS on Listen. Set both files or neither. The files are read
// again when they change (a renewed certificate needs no restart), so they may be replaced
// in place, by a rename, or by a Kubernetes Secret volume's update.
type TLS struct {
	// CertFile is the PEM certificate chain, leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf certificate.
	KeyFile string `yaml:"key_file"`
}

// Enabled reports whether the gateway serves HTTPS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// validate checks that both files are set and hold a matching certificate and key, so that
// a mistake is reported at start (or by `fencegate check`) rather than at the first
// handshake.
func (t *TLS) validate() error {
	if !t.Enabled() {
		return nil
	}
	if t.CertFile == "" {
		return fmt.Errorf("tls.cert_file: required when tls.key_file is set")
	}
	if t.KeyFile == "" {
		return fmt.Errorf("tls.key_file: required when tls.cert_file is set")
	}
	_, err := LoadKeyPair(t.CertFile, t.KeyFile)
	return err
}

// LoadKeyPair reads a certificate and its key, with errors that name the configuration field
// at fault. The gateway uses it both at start and when the files change.
func LoadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("tls.cert_file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.key_file: %w", err)
	}
	// tls.X509KeyPair does not say which input is wrong; a certificate file without any
	// certificate is the cert_file's fault, anything else is a key that does not fit.
	if !hasPEMBlock(certPEM, "CERTIFICATE") {
		return nil, fmt.Errorf("tls.cert_file: %s holds no PEM certificate", certFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.key_file: %s does not hold the private key of tls.cert_file %s: %w", keyFile, certFile, err)
	}
	return &cert, nil
}

func hasPEMBlock(b []byte, typ string) bool {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return false
		}
		if block.Type == typ {
			return true
		}
	}
}
