package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// ErrClosed is returned by Await once the proxy has been closed.
var ErrClosed = errors.New("faultproxy: proxy closed")

// Proxy forwards every connection accepted on its loopback address to one target and
// applies the faults currently switched on. All methods are safe for concurrent use.
type Proxy struct {
	target string
	addr   string // fixed at Start; Refuse(false) listens on it again

	ctx    context.Context // cancelled by Close: aborts dials to the target
	cancel context.CancelFunc
	dialer net.Dialer
	wg     sync.WaitGroup // every goroutine the proxy starts

	// lifecycle serialises Refuse and Close, which close and open listeners and wait for
	// accept loops, without holding mu while they do.
	lifecycle sync.Mutex

	mu         sync.Mutex
	closed     bool
	closing    chan struct{} // closed by Close
	listener   net.Listener  // nil while refusing or closed
	hold       func()        // releases the port held while refusing (holdPort); under lifecycle
	acceptDone chan struct{} // closed when the current listener's accept loop returns
	links      map[*link]struct{}
	faults     faultState
	stats      Stats
	statsWake  chan struct{} // closed and replaced on every change of stats
	err        error         // first failure of the proxy itself, reported by Err
}

// Start listens on 127.0.0.1 on a free port and forwards every connection it accepts to
// target (host:port), dialled afresh for each accepted connection.
func Start(target string) (*Proxy, error) {
	return StartOn("127.0.0.1:0", target)
}

// StartOn is Start listening on addr (host:port; port 0 picks a free one), for a proxy
// whose address must be known before it starts, such as one named in another program's
// configuration.
func StartOn(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen on %s for %s: %w", addr, target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:    target,
		addr:      ln.Addr().String(),
		ctx:       ctx,
		cancel:    cancel,
		closing:   make(chan struct{}),
		links:     make(map[*link]struct{}),
		faults:    newFaultState(),
		statsWake: make(chan struct{}),
	}
	p.mu.Lock()
	p.serveListenerLocked(ln)
	p.mu.Unlock()
	return p, nil
}

// Addr is the proxy's listening address, "127.0.0.1:PORT". It does not change when the
// proxy refuses and listens again.
func (p *Proxy) Addr() string { return p.addr }

// URL is "http://" + Addr(), for pointing an HTTP client at the proxy.
func (p *Proxy) URL() string { return "http://" + p.addr }

// Target is the host:port every accepted connection is forwarded to.
func (p *Proxy) Target() string { return p.target }

// Err reports the first failure of the proxy itself, such as being unable to listen on
// its port again after Refuse(false). A test that toggles Refuse should check it.
func (p *Proxy) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close stops listening, closes every open connection on both sides, and returns once
// every goroutine the proxy started has returned. It returns the error Err would report.
// Calling it again does nothing more.
func (p *Proxy) Close() error {
	p.lifecycle.Lock()
	defer p.lifecycle.Unlock()

	p.mu.Lock()
	if p.closed {
		err := p.err
		p.mu.Unlock()
		return err
	}
	p.closed = true
	close(p.closing)
	ln := p.listener
	p.listener = nil
	links := p.linksLocked()
	p.mu.Unlock()

	p.cancel()
	p.releaseHold()
	if ln != nil {
		if err := ln.Close(); err != nil {
			p.fail(fmt.Errorf("faultproxy: close listener %s: %w", p.addr, err))
		}
	}
	for _, l := range links {
		l.end(false)
	}
	p.wg.Wait()
	return p.Err()
}

// fail records err as the proxy's failure unless one is already recorded.
func (p *Proxy) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// linksLocked returns a snapshot of the open links. The caller holds mu.
func (p *Proxy) linksLocked() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}
