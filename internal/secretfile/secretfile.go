// Package secretfile reads a shared secret from a file that may hold the next one too, and
// reads the file again when it changes, so that the secret between gateways and agents can
// be rotated without restarting either (docs/design.md §4, "Rotating the agent secret").
//
// A file holds one secret per line, at most two: the first is the current one, which a
// sender sends; a receiver accepts either. Blank lines and surrounding spaces are ignored.
// It is shell code (it reads files); it imports no other fencegate package.
package secretfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxSecrets is how many secrets a file may hold: the current one, and the next one (or,
// while a rotation finishes, the previous one).
const MaxSecrets = 2

// DefaultPoll is how often Watch reads the file again: a Kubernetes Secret volume is
// updated in place by the kubelet, with no signal to the process.
const DefaultPoll = 10 * time.Second

// Secrets is what one secret file held.
type Secrets struct {
	list []string
	sums [][sha256.Size]byte
}

// Parse reads the secrets of a file's content.
func Parse(b []byte) (*Secrets, error) {
	var list []string
	for line := range strings.Lines(string(b)) {
		if s := strings.TrimSpace(line); s != "" {
			list = append(list, s)
		}
	}
	switch {
	case len(list) == 0:
		return nil, errors.New("holds no secret")
	case len(list) > MaxSecrets:
		return nil, fmt.Errorf("holds %d secrets; at most %d, one per line: the current one first, then the next (or the previous)", len(list), MaxSecrets)
	}
	return newSecrets(list), nil
}

func newSecrets(list []string) *Secrets {
	s := &Secrets{list: list}
	for _, v := range list {
		s.sums = append(s.sums, sha256.Sum256([]byte(v)))
	}
	return s
}

// Current is the secret to send.
func (s *Secrets) Current() string { return s.list[0] }

// Len is how many secrets are accepted.
func (s *Secrets) Len() int { return len(s.list) }

// Accepts reports whether got is one of the secrets. Both sides are hashed first, so the
// comparison takes the same time whatever got is and whichever secret it matches.
func (s *Secrets) Accepts(got string) bool {
	sum := sha256.Sum256([]byte(got))
	ok := 0
	for _, want := range s.sums {
		ok |= subtle.ConstantTimeCompare(sum[:], want[:])
	}
	return ok == 1
}

// File is a secret file as it was last read without error. A nil *File holds no secret.
// Safe for concurrent use.
type File struct {
	path string
	cur  atomic.Pointer[Secrets]

	mu      sync.Mutex // serialises reads of the file
	raw     []byte     // the content last read without error
	lastErr string     // the last read's error, so that Watch logs each new one once
}

// Load reads path; an unreadable file, or one that holds no secret or too many, is an error
// naming the file.
func Load(path string) (*File, error) {
	f := &File{path: path}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Fixed is a File of the given secrets that no file backs (Reload keeps them); nil when
// the first is empty.
func Fixed(secrets ...string) *File {
	if len(secrets) == 0 || secrets[0] == "" {
		return nil
	}
	f := &File{}
	f.cur.Store(newSecrets(secrets))
	return f
}

// Path is the file's path ("" for a Fixed one).
func (f *File) Path() string {
	if f == nil {
		return ""
	}
	return f.path
}

// Secrets returns the secrets read last (nil for a nil File).
func (f *File) Secrets() *Secrets {
	if f == nil {
		return nil
	}
	return f.cur.Load()
}

// Current is the secret to send; "" for a nil File.
func (f *File) Current() string {
	if s := f.Secrets(); s != nil {
		return s.Current()
	}
	return ""
}

// Accepts reports whether got is one of the secrets read last; a nil File accepts nothing.
func (f *File) Accepts(got string) bool {
	if s := f.Secrets(); s != nil {
		return s.Accepts(got)
	}
	return false
}

// Reload reads the file again and reports whether its secrets changed. A file that cannot
// be read, or holds no secret or too many, is an error and the secrets read last stay in
// force: a half-written or emptied file must not lock every sender out.
func (f *File) Reload() (changed bool, err error) {
	if f == nil || f.path == "" {
		return false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(f.path)
	if err == nil && bytes.Equal(b, f.raw) && f.cur.Load() != nil {
		f.lastErr = ""
		return false, nil
	}
	var s *Secrets
	if err == nil {
		if s, err = Parse(b); err != nil {
			err = fmt.Errorf("%s %w", f.path, err)
		}
	}
	if err != nil {
		f.lastErr = err.Error()
		return false, err
	}
	f.raw, f.lastErr = b, ""
	f.cur.Store(s)
	return true, nil
}

// Watch reads the file again every period until ctx ends, logging each change (how many
// secrets are now accepted, never a secret) and each new error once; observe, when not
// nil, is told the outcome of every read.
func (f *File) Watch(ctx context.Context, every time.Duration, what string, log *slog.Logger, observe func(changed bool, err error)) {
	if f == nil || f.path == "" {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := f.ReloadLogged(what, log)
		if observe != nil {
			observe(changed, err)
		}
	}
}

// ReloadLogged is Reload with its outcome logged as Watch logs it.
func (f *File) ReloadLogged(what string, log *slog.Logger) (changed bool, err error) {
	if f == nil || f.path == "" {
		return false, nil
	}
	f.mu.Lock()
	prevErr := f.lastErr
	f.mu.Unlock()
	changed, err = f.Reload()
	switch {
	case err != nil && err.Error() != prevErr:
		log.Warn(what+" not read again; keeping the secrets read last", "err", err)
	case changed:
		log.Info(what+" read again", "file", f.path, "secrets", f.Secrets().Len())
	}
	return changed, err
}
