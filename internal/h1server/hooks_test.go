package h1server

import (
	"sync"
	"testing"
)

// The package's test hooks are set once, here, before any server runs (so that setting
// them races with nothing), and pass each event on to the test that watches the
// connection, found by the client's address (the server's c.remote).

type hookKind int

const (
	hookIdle hookKind = iota
	hookPeerClosed
)

type hookKey struct {
	kind   hookKind
	remote string
}

var hookWatchers sync.Map // hookKey -> func(*conn)

func init() {
	testHookIdle = func(c *conn) { runHook(hookIdle, c) }
	testHookPeerClosed = func(c *conn) { runHook(hookPeerClosed, c) }
}

func runHook(kind hookKind, c *conn) {
	if f, ok := hookWatchers.Load(hookKey{kind, c.remote}); ok {
		f.(func(*conn))(c)
	}
}

// watch calls f, on the goroutine that runs the hook, for each event of that kind on the
// connection whose client end is at clientAddr, until the test ends.
func watch(t testing.TB, kind hookKind, clientAddr string, f func(*conn)) {
	key := hookKey{kind, clientAddr}
	hookWatchers.Store(key, f)
	t.Cleanup(func() { hookWatchers.Delete(key) })
}

// watchPeerClosed returns a channel closed once the hangup watcher has handled the
// client's FIN or reset on the connection from clientAddr.
func watchPeerClosed(t testing.TB, clientAddr string) <-chan struct{} {
	seen := make(chan struct{})
	var once sync.Once
	watch(t, hookPeerClosed, clientAddr, func(*conn) { once.Do(func() { close(seen) }) })
	return seen
}
