package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// relistenAttempts and relistenBackoff bound how long Refuse(false) keeps trying to bind
// the proxy's port again; the bind can fail for a moment if another socket grabbed the port
// while the proxy was refusing.
const (
	relistenAttempts = 50
	relistenBackoff  = 10 * time.Millisecond
)

// acceptBackoff is the pause after an accept error other than a closed listener (for
// example too many open files), so a persistent failure does not spin a core.
const acceptBackoff = 5 * time.Millisecond

// Refuse(true) closes the proxy's listener, so new connections are refused as by a host
// whose process is gone (the dialler gets ECONNREFUSED), and holds the port meanwhile
// (holdPort) so that no other listener is given it. Connections already open are left
// alone; call Reset as well to sever them. Refuse(false) listens on the same port again.
// Calling it with the current state does nothing. Heal does not undo Refuse.
//
// If the port cannot be bound again, the proxy stays refusing and Err reports why.
func (p *Proxy) Refuse(on bool) {
	p.lifecycle.Lock()
	defer p.lifecycle.Unlock()
	if on {
		p.stopListening()
		return
	}
	p.listenAgain()
}

// stopListening closes the current listener and waits for its accept loop, so that once it
// returns no further connection can be accepted. The caller holds lifecycle.
func (p *Proxy) stopListening() {
	p.mu.Lock()
	ln, done := p.listener, p.acceptDone
	p.listener = nil
	p.mu.Unlock()
	if ln == nil {
		return
	}
	if err := ln.Close(); err != nil {
		p.fail(fmt.Errorf("faultproxy: close listener %s: %w", p.addr, err))
	}
	<-done
	if release, err := holdPort(p.addr); err == nil {
		p.hold = release
	}
}

// releaseHold lets go of the port held while refusing, if any. The caller holds lifecycle.
func (p *Proxy) releaseHold() {
	if p.hold != nil {
		p.hold()
		p.hold = nil
	}
}

// listenAgain binds the proxy's port again after stopListening. The caller holds lifecycle.
func (p *Proxy) listenAgain() {
	p.mu.Lock()
	refusing := p.listener == nil && !p.closed
	p.mu.Unlock()
	if !refusing {
		return
	}
	// The listener binds beside the held port (both with SO_REUSEADDR, the held one not
	// listening), so the port is never free in between; should that bind fail all the
	// same, the hold is let go and the bind tried again.
	var err error
	for range relistenAttempts {
		var ln net.Listener
		ln, err = net.Listen("tcp", p.addr)
		if err == nil {
			p.releaseHold()
			p.mu.Lock()
			p.serveListenerLocked(ln)
			p.mu.Unlock()
			return
		}
		if p.hold != nil {
			p.releaseHold()
			continue
		}
		time.Sleep(relistenBackoff)
	}
	p.fail(fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err))
}

// serveListenerLocked makes ln the proxy's listener and starts its accept loop. The caller
// holds mu.
func (p *Proxy) serveListenerLocked(ln net.Listener) {
	done := make(chan struct{})
	p.listener = ln
	p.acceptDone = done
	p.wg.Add(1)
	go p.acceptLoop(ln, done)
}

// acceptLoop accepts connections on ln until ln is closed and starts a link for each.
func (p *Proxy) acceptLoop(ln net.Listener, done chan<- struct{}) {
	defer p.wg.Done()
	defer close(done)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.fail(fmt.Errorf("faultproxy: accept on %s: %w", p.addr, err))
			time.Sleep(acceptBackoff)
			continue
		}
		p.admit(conn.(*net.TCPConn))
	}
}

// admit registers a freshly accepted connection and starts forwarding it, or closes it if
// the proxy is closing.
func (p *Proxy) admit(client *net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = client.Close()
		return
	}
	l := newLink(p, client)
	p.links[l] = struct{}{}
	p.stats.Accepted++
	p.stats.Open++
	p.wakeStatsLocked()
	p.wg.Add(1)
	go l.run()
}

// forget removes an ended link from the open set.
func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.links[l]; !ok {
		return
	}
	delete(p.links, l)
	p.stats.Open--
	p.wakeStatsLocked()
}
