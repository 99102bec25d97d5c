package main

import (
	"crypto/tls"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/config"
)

// certCheckEvery bounds how often the certificate files are looked at: at most once per
// interval, on a handshake. A renewed certificate is served within this long of being
// written, and a burst of handshakes costs two stat calls per interval, not per handshake.
const certCheckEvery = time.Second

// tlsNow is the clock of the certificate reloader; tests replace it to make the next
// handshake look at the files without waiting.
var tlsNow = time.Now

// certReloader serves a certificate and key from files, reading them again when they
// change, so a renewed certificate (cert-manager, a Secret volume's update, a cron job)
// needs no restart. It needs no watcher goroutine: the check happens on the handshakes.
type certReloader struct {
	certFile, keyFile string
	every             time.Duration
	now               func() time.Time
	log               *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	checked   time.Time   // when the files were last looked at
	certStamp os.FileInfo // the files as they were at the last load attempt
	keyStamp  os.FileInfo
}

// newCertReloader loads the pair once; an error here stops the gateway from starting.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, every: certCheckEvery, now: tlsNow, log: log}
	// Stat before reading: a change landing between the two is then seen at the next check
	// rather than missed.
	cs, ks := r.stat()
	cert, err := config.LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.certStamp, r.keyStamp, r.checked = cert, cs, ks, r.now()
	return r, nil
}

// GetCertificate is the tls.Config hook: the current certificate, reloaded first if the
// files changed since they were last looked at.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= r.every || now.Before(r.checked) {
		r.checked = now
		r.reloadIfChanged()
	}
	return r.cert, nil
}

// reloadIfChanged loads the pair when either file differs from what was last tried. A pair
// that fails to load (the certificate written but not yet its key, say) leaves the previous
// certificate in service; it is tried again once either file changes again.
func (r *certReloader) reloadIfChanged() {
	cs, ks := r.stat()
	if cs == nil || ks == nil || (sameFile(cs, r.certStamp) && sameFile(ks, r.keyStamp)) {
		return
	}
	r.certStamp, r.keyStamp = cs, ks
	cert, err := config.LoadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.log.Warn("tls: the certificate files changed but do not load; still serving the previous certificate", "err", err)
		return
	}
	r.cert = cert
	r.log.Info("tls: certificate reloaded", "cert_file", r.certFile, "not_after", cert.Leaf.NotAfter)
}

// stat looks at both files; nil for a file that cannot be looked at (in the middle of
// being replaced), which defers the reload to a later check.
func (r *certReloader) stat() (cert, key os.FileInfo) {
	cert, _ = os.Stat(r.certFile)
	key, _ = os.Stat(r.keyFile)
	return cert, key
}

// sameFile reports whether a file is unchanged: the same inode (a rename or a Secret
// volume's symlink swap gives a new one), size and modification time (an in-place write).
func sameFile(a, b os.FileInfo) bool {
	return b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
