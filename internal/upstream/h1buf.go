package upstream

import "sync"

// bufPool keeps the connections' read buffers of the client's ReadBufferSize while no
// connection needs one. A connection holds a buffer only while bytes wait in it or a read
// is under way: one that waits on an engine that has sent nothing yet (a long prefill,
// the gap between two tokens of a slow stream) or sits idle in the pool holds none, so
// that thousands of open, quiet streams do not hold thousands of empty buffers
// (docs/design.md §6, the memory of an open stream).
type bufPool struct {
	size int
	p    sync.Pool // of *[]byte of len size
}

func newBufPool(size int) *bufPool { return &bufPool{size: size} }

func (b *bufPool) get() *[]byte {
	if v, _ := b.p.Get().(*[]byte); v != nil {
		return v
	}
	buf := make([]byte, b.size)
	return &buf
}

func (b *bufPool) put(v *[]byte) {
	if testHookBufPut != nil {
		testHookBufPut()
	}
	b.p.Put(v)
}

// testHookBufPut, when set by a test, is called on each buffer given back.
var testHookBufPut func()
