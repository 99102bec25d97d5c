package gateway_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
)

// recordedWrites keeps what a server wrote to its clients' connections: every write, as it
// was handed to the connection, and the bytes the connection took.
type recordedWrites struct {
	mu     sync.Mutex
	writes [][]byte
	// written counts the bytes the connections took, readable from any goroutine.
	written atomic.Int64
}

func (r *recordedWrites) add(b []byte) {
	r.mu.Lock()
	r.writes = append(r.writes, bytes.Clone(b))
	r.mu.Unlock()
}

func (r *recordedWrites) all() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// recordingListener records in w what the server writes to the connections it accepts.
type recordingListener struct {
	net.Listener
	w *recordedWrites
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{c, l.w}, nil
}

type recordingConn struct {
	net.Conn
	w *recordedWrites
}

// Write records b before it leaves, since the client may have read it before Write
// returns, and counts what the connection took after.
func (c recordingConn) Write(b []byte) (int, error) {
	c.w.add(b)
	n, err := c.Conn.Write(b)
	c.w.written.Add(int64(n))
	return n, err
}
