package upstream

import (
	"sync"
	"time"
)

// pool holds the idle kept-alive connections, per replica, most recently used last.
// Nothing runs while a connection is idle but its timer, which closes it once it has been
// idle for the timeout: below the engines' own keep-alive timeout, so the gateway closes
// an idle connection before the engine does instead of racing the engine's close with a
// new request.
type pool struct {
	timeout   time.Duration
	maxPerKey int
	maxTotal  int

	mu    sync.Mutex
	idle  map[string][]*conn
	total int
}

func newPool(timeout time.Duration, maxPerKey, maxTotal int) *pool {
	return &pool{timeout: timeout, maxPerKey: maxPerKey, maxTotal: maxTotal, idle: make(map[string][]*conn)}
}

// get takes the most recently used idle connection to key that is still usable, or
// returns nil. It closes the ones it finds expired or broken on the way.
func (p *pool) get(key string) *conn {
	for {
		p.mu.Lock()
		stack := p.idle[key]
		if len(stack) == 0 {
			p.mu.Unlock()
			return nil
		}
		c := stack[len(stack)-1]
		stack[len(stack)-1] = nil
		p.idle[key] = stack[:len(stack)-1]
		p.total--
		c.idle = false
		// A timer that already fired has closed the connection, or is about to (it finds
		// the connection no longer idle and leaves it): either way it is not used.
		expired := !c.idleTimer.Stop()
		p.mu.Unlock()
		if expired || c.idleBroken() {
			c.close()
			continue
		}
		return c
	}
}

// put makes c idle, or closes it when the pool is full. An idle connection holds no
// read buffer.
func (p *pool) put(c *conn) {
	c.release()
	p.mu.Lock()
	if len(p.idle[c.key]) >= p.maxPerKey || p.total >= p.maxTotal {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle[c.key] = append(p.idle[c.key], c)
	p.total++
	c.idle = true
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(p.timeout, func() { p.expire(c) })
	} else {
		c.idleTimer.Reset(p.timeout)
	}
	p.mu.Unlock()
}

// expire closes c if it is still idle when its timer fires.
func (p *pool) expire(c *conn) {
	p.mu.Lock()
	if !c.idle {
		p.mu.Unlock()
		return
	}
	p.removeLocked(c)
	p.mu.Unlock()
	c.close()
}

func (p *pool) removeLocked(c *conn) {
	stack := p.idle[c.key]
	for i, x := range stack {
		if x == c {
			copy(stack[i:], stack[i+1:])
			stack[len(stack)-1] = nil
			stack = stack[:len(stack)-1]
			break
		}
	}
	if len(stack) == 0 {
		delete(p.idle, c.key)
	} else {
		p.idle[c.key] = stack
	}
	p.total--
	c.idle = false
}

// closeAll closes every idle connection.
func (p *pool) closeAll() {
	p.mu.Lock()
	var all []*conn
	for key, stack := range p.idle {
		for _, c := range stack {
			c.idle = false
			c.idleTimer.Stop()
			all = append(all, c)
		}
		delete(p.idle, key)
	}
	p.total = 0
	p.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

// count returns the number of idle connections to key.
func (p *pool) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[key])
}
