package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pair returns the two ends of a TCP connection on loopback, small buffers on the
// writing end so that a few hundred KiB already fill it.
func pair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	client.SetWriteBuffer(16 << 10)
	server.SetReadBuffer(16 << 10)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// rawOf is the socket of c, as the gateway's connections hand theirs to a Writer.
func rawOf(t *testing.T, c *net.TCPConn) syscall.RawConn {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i%251)
	}
	return b
}

func TestWriterIsRawOnASocket(t *testing.T) {
	c, _ := pair(t)
	if w := NewWriter(c, rawOf(t, c)); (w.raw != nil) != rawCalls {
		t.Fatalf("raw writer on a TCP socket: %v, want %v", w.raw != nil, rawCalls)
	}
	if r := NewReader(c, rawOf(t, c)); (r.raw != nil) != rawCalls {
		t.Fatalf("raw reader on a TCP socket: %v, want %v", r.raw != nil, rawCalls)
	}
}

// A write larger than the socket's buffers waits for room with the poller (EAGAIN) and
// goes out whole, in order.
func TestWriteWaitsForRoomAndWritesAll(t *testing.T) {
	c, s := pair(t)
	want := pattern(4<<20, 7)
	w := NewWriter(c, rawOf(t, c))
	done := make(chan error, 1)
	var n int
	go func() {
		var err error
		n, err = w.Write(want)
		done <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(NewReader(s, rawOf(t, s)), got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || n != len(want) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(want))
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read are not the bytes written")
	}
}

// More buffers than one writev takes, some empty, large enough to be cut short inside one:
// they arrive whole and in order, and the caller's slices are left as they were.
func TestWriteBuffersInOrder(t *testing.T) {
	c, s := pair(t)
	var bufs [][]byte
	var want []byte
	for i := range 21 {
		b := pattern((i%5)*97_003, byte(i))
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	heads := make([][]byte, len(bufs))
	copy(heads, bufs)
	w := NewWriter(c, rawOf(t, c))
	done := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = w.WriteBuffers(bufs)
		done <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || n != int64(len(want)) {
		t.Fatalf("WriteBuffers = %d, %v; want %d, nil", n, err, len(want))
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read are not the bytes written")
	}
	for i := range bufs {
		if len(bufs[i]) != len(heads[i]) || (len(bufs[i]) > 0 && &bufs[i][0] != &heads[i][0]) {
			t.Fatalf("buffer %d was changed", i)
		}
	}
}

// Writes from several goroutines are never interleaved within one call.
func TestConcurrentWritesStayWhole(t *testing.T) {
	c, s := pair(t)
	w := NewWriter(c, rawOf(t, c))
	const writers, records, size = 4, 16, 3000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			rec := bytes.Repeat([]byte{byte('a' + g)}, size)
			for range records {
				if _, err := w.Write(rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	got := make([]byte, writers*records*size)
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := 0; i < len(got); i += size {
		if rec := got[i : i+size]; !bytes.Equal(rec, bytes.Repeat(rec[:1], size)) {
			t.Fatalf("record at %d is interleaved", i)
		}
	}
}

// A write deadline ends the wait for room as net's Write ends it: a timeout, counted bytes.
func TestWriteDeadline(t *testing.T) {
	c, _ := pair(t)
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	n, err := NewWriter(c, rawOf(t, c)).Write(pattern(1<<20, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write after the deadline = %d, %v; want os.ErrDeadlineExceeded", n, err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v is not a net.Error timeout", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("%v is not a *net.OpError write", err)
	}
}

// A read deadline ends the wait for bytes; the peer's FIN is io.EOF after its bytes.
func TestReaderDeadlineAndEOF(t *testing.T) {
	c, s := pair(t)
	r := NewReader(c, rawOf(t, c))
	c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := r.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	c.SetReadDeadline(time.Time{})
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	s.CloseWrite()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "hello" {
		t.Fatalf("ReadAll = %q, %v; want hello, nil", got, err)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the FIN = %d, %v; want 0, io.EOF", n, err)
	}
}

// The peer's reset comes back as the errno net would give, wrapped as net wraps it: the
// engine client's classification of failures reads it (internal/upstream).
func TestPeerResetIsTheErrno(t *testing.T) {
	c, s := pair(t)
	s.SetLinger(0)
	s.Close() // a reset
	r := NewReader(c, rawOf(t, c))
	_, err := r.Read(make([]byte, 16))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after the peer's reset: %v, want ECONNRESET", err)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "read" {
		t.Fatalf("%v does not wrap an *os.SyscallError read", err)
	}
	_, err = NewWriter(c, rawOf(t, c)).Write([]byte("x"))
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write after the peer's reset: %v, want EPIPE or ECONNRESET", err)
	}
}

// A Close from another goroutine ends a write waiting for room, as it ends net's.
func TestCloseEndsAWaitingWrite(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	started := make(chan struct{})
	w := NewWriter(c, rawOf(t, c))
	go func() {
		close(started)
		_, err := w.Write(pattern(8<<20, 3)) // far more than both ends' buffers hold
		done <- err
	}()
	<-started
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write across a Close: %v, want net.ErrClosed", err)
	}
}

// What is not a socket is written and read through its own methods.
func TestNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w, r := NewWriter(a, nil), NewReader(b, nil)
	if w.raw != nil || r.raw != nil {
		t.Fatal("a net.Pipe has no socket to call raw")
	}
	go w.WriteBuffers([][]byte{[]byte("he"), nil, []byte("llo")})
	got := make([]byte, 5)
	if _, err := io.ReadFull(r, got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
}
