//go:build !linux

package h1server

// hangupWatcher is Linux's alone (epoll): elsewhere the server is not Available, and the
// gateway serves with net/http.
type hangupWatcher struct{}

var hangups hangupWatcher

func (hangupWatcher) available() bool { return false }
func (hangupWatcher) add(*conn) bool  { return false }
func (hangupWatcher) remove(*conn)    {}
func (c *conn) unreadBytes() bool     { return false }
func (c *conn) waitReadable() error   { return nil }
