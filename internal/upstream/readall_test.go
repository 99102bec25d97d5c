package upstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAllReadsAsIOReadAll: whatever the body's reader does and whatever length the
// request declared, readBody returns what io.ReadAll returns; only its buffer differs.
func TestReadAllReadsAsIOReadAll(t *testing.T) {
	boom := errors.New("connection reset")
	long := strings.Repeat("prompt ", 40<<10) // 280 KiB: past io.ReadAll's first buffers
	readers := map[string]func() io.Reader{
		"whole":              func() io.Reader { return strings.NewReader(long) },
		"a byte at a time":   func() io.Reader { return iotest.OneByteReader(strings.NewReader(long)) },
		"EOF with the data":  func() io.Reader { return iotest.DataErrReader(strings.NewReader(long)) },
		"half then an error": func() io.Reader { return io.MultiReader(strings.NewReader(long[:len(long)/2]), iotest.ErrReader(boom)) },
		"cut short": func() io.Reader {
			return io.MultiReader(strings.NewReader(long[:100]), iotest.ErrReader(io.ErrUnexpectedEOF))
		},
		"empty": func() io.Reader { return strings.NewReader("") },
	}
	for name, r := range readers {
		want, wantErr := io.ReadAll(r())
		for _, declared := range []int64{-1, 0, 1, 100, int64(len(long)) - 1, int64(len(long)), int64(len(long)) + 1, 1 << 30} {
			got, err := ReadAll(r(), declared, 1<<29)
			if !bytes.Equal(got, want) || !errors.Is(err, wantErr) && err != wantErr {
				t.Errorf("%s, declared %d: %d bytes, %v; io.ReadAll: %d bytes, %v", name, declared, len(got), err, len(want), wantErr)
			}
		}
	}
}

// BenchmarkReadAll: a 1 MiB prompt read 64 KiB at a time, as from a socket, into its
// declared size and by io.ReadAll.
func BenchmarkReadAll(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789"), 1<<20/10)
	for _, c := range []struct {
		name     string
		declared int64
	}{{"declared", int64(len(body))}, {"read-all", -1}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r := io.LimitReader(bytes.NewReader(body), int64(len(body)))
				if _, err := ReadAll(chunkReader{r}, c.declared, 1<<30); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// chunkReader returns at most 64 KiB a read.
type chunkReader struct{ r io.Reader }

func (c chunkReader) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	return c.r.Read(p)
}
