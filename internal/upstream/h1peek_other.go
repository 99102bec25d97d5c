//go:build !linux

package upstream

import "net"

// initPeek does nothing off Linux: an idle connection is reused without a look, and an
// engine's earlier close shows as ErrServerClosedIdle.
func (c *conn) initPeek(net.Conn) {}

func (c *conn) idleBroken() bool { return false }

// initBare does nothing off Linux: reads wait holding the connection's buffer.
func (c *conn) initBare() {}

func (c *conn) fillBare() (int, error) { panic("upstream: fillBare without initBare") }
