//go:build linux

package h1server

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/fencegate/fencegate/internal/sockio"
)

// hangupWatcher notices clients that leave: one goroutine for the process waits in an
// epoll set of its own for the FIN or the reset of every open connection, and tells the
// connection, which cancels its running request. The runtime's poller watches the same
// sockets for reads and writes; this set asks only for EPOLLRDHUP, once (EPOLLONESHOT),
// so a connection costs its registration and nothing per request. It replaces net/http's
// goroutine per connection blocked in a read for the same purpose.
type hangupWatcher struct {
	once  sync.Once
	epfd  int
	err   error
	mu    sync.Mutex
	next  uint64
	conns map[uint64]*conn
}

var hangups hangupWatcher

func (h *hangupWatcher) start() {
	h.epfd, h.err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if h.err != nil {
		return
	}
	h.conns = make(map[uint64]*conn)
	go h.run()
}

func (h *hangupWatcher) available() bool {
	h.once.Do(h.start)
	return h.err == nil
}

// add registers c; false when it cannot be watched (no file descriptor, no epoll).
func (h *hangupWatcher) add(c *conn) bool {
	if !h.available() || c.raw == nil {
		return false
	}
	h.mu.Lock()
	h.next++
	id := h.next
	h.conns[id] = c
	h.mu.Unlock()
	var err error
	cerr := c.raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
		err = unix.EpollCtl(h.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || cerr != nil {
		h.mu.Lock()
		delete(h.conns, id)
		h.mu.Unlock()
		return false
	}
	c.watchID = id
	return true
}

// remove unregisters c; it must be called before c's socket is closed.
func (h *hangupWatcher) remove(c *conn) {
	if c.watchID == 0 {
		return
	}
	h.mu.Lock()
	delete(h.conns, c.watchID)
	h.mu.Unlock()
	c.watchID = 0
	c.raw.Control(func(fd uintptr) {
		unix.EpollCtl(h.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
}

func (h *hangupWatcher) run() {
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(h.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			panic("h1server: epoll_wait: " + err.Error()) // EBADF or EINVAL: a bug here, not a client's doing
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			h.mu.Lock()
			c := h.conns[id]
			h.mu.Unlock()
			if c != nil {
				c.peerClosed(ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0)
			}
		}
	}
}

// unreadBytes reports whether the kernel holds bytes from the client not yet read.
func (c *conn) unreadBytes() bool {
	if c.raw == nil {
		return false
	}
	n := 0
	c.raw.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return n > 0
}

// waitReadable waits, holding no buffer, until the client has sent something (or closed,
// or the read deadline passed: the error then). The socket is looked at once; after the
// runtime's poller has found it readable it is not looked at again, since the read that
// follows costs a system call anyway (and waits again, should the readiness have been
// spurious).
func (c *conn) waitReadable() error {
	if c.raw == nil {
		return nil
	}
	if c.waitFn == nil {
		c.waitFn = func(fd uintptr) bool {
			if c.waited {
				return true
			}
			c.waited = true
			// A raw recvfrom(2) with MSG_DONTWAIT: it cannot block (internal/sockio).
			_, errno := sockio.Peek(fd, c.peek[:])
			return errno != unix.EAGAIN
		}
	}
	c.waited = false
	return c.raw.Read(c.waitFn)
}
