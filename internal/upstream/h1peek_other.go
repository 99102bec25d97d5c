//go:build !linux

package upstream

import "net"

// initPeek does nothing off Linux: an idle connection is reused without a look, and an
// engine's earlier close shows as ErrServerClosedIdle.
func (c *conn) initPeek(net.Conn) {}

func (c *conn) idleBroken() bool { return false }
