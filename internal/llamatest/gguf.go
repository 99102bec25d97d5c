package llamatest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// The GGUF container, version 3 (ggml's docs/gguf.md): a header (magic, version, tensor
// count, metadata count), the metadata key-value pairs, one info per tensor (name,
// dimensions innermost first, type, offset into the data section), padding to the
// alignment, then the tensor data, each tensor starting at an aligned offset. Everything is
// little-endian; strings are a uint64 length and the bytes, no terminator.

const (
	ggufMagic     = "GGUF"
	ggufVersion   = 3
	ggufAlignment = 32 // general.alignment's default; the file states it anyway
)

// Metadata value types (gguf_metadata_value_type).
const (
	kvUint32  uint32 = 4
	kvInt32   uint32 = 5
	kvFloat32 uint32 = 6
	kvBool    uint32 = 7
	kvString  uint32 = 8
	kvArray   uint32 = 9
)

// ggmlTypeF32 is the only tensor type written: a tiny model gains nothing from
// quantisation, and F32 has no block layout to get wrong.
const ggmlTypeF32 uint32 = 0

// kv is one metadata pair. value is one of uint32, int32, float32, bool, string,
// []string, []float32, []int32.
type kv struct {
	key   string
	value any
}

// tensor is one F32 tensor. dims are ggml's ne: dims[0] is the contiguous (innermost)
// dimension, so a matrix that maps n inputs to m outputs is {n, m} and its data is m rows
// of n values.
type tensor struct {
	name string
	dims []int
	data []float32
}

type ggufWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (g *ggufWriter) write(v any) {
	if g.err != nil {
		return
	}
	g.err = binary.Write(g.w, binary.LittleEndian, v)
	if g.err == nil {
		g.n += int64(binary.Size(v))
	}
}

func (g *ggufWriter) str(s string) {
	g.write(uint64(len(s)))
	if g.err == nil {
		var n int
		n, g.err = g.w.WriteString(s)
		g.n += int64(n)
	}
}

func (g *ggufWriter) pad() {
	for g.err == nil && g.n%ggufAlignment != 0 {
		g.write(uint8(0))
	}
}

func (g *ggufWriter) value(v any) {
	switch v := v.(type) {
	case uint32:
		g.write(kvUint32)
		g.write(v)
	case int32:
		g.write(kvInt32)
		g.write(v)
	case float32:
		g.write(kvFloat32)
		g.write(v)
	case bool:
		g.write(kvBool)
		b := uint8(0)
		if v {
			b = 1
		}
		g.write(b)
	case string:
		g.write(kvString)
		g.str(v)
	case []string:
		g.write(kvArray)
		g.write(kvString)
		g.write(uint64(len(v)))
		for _, s := range v {
			g.str(s)
		}
	case []float32:
		g.write(kvArray)
		g.write(kvFloat32)
		g.write(uint64(len(v)))
		g.write(v)
	case []int32:
		g.write(kvArray)
		g.write(kvInt32)
		g.write(uint64(len(v)))
		g.write(v)
	default:
		if g.err == nil {
			g.err = fmt.Errorf("gguf: unsupported metadata value %T", v)
		}
	}
}

// writeGGUF writes a GGUF v3 file of the given metadata and F32 tensors.
func writeGGUF(w io.Writer, meta []kv, tensors []tensor) error {
	g := &ggufWriter{w: bufio.NewWriter(w)}
	g.w.WriteString(ggufMagic)
	g.n += int64(len(ggufMagic))
	g.write(uint32(ggufVersion))
	g.write(uint64(len(tensors)))
	g.write(uint64(len(meta)))
	for _, m := range meta {
		g.str(m.key)
		g.value(m.value)
	}
	var offset uint64
	for _, t := range tensors {
		n := uint64(1)
		for _, d := range t.dims {
			n *= uint64(d)
		}
		if n != uint64(len(t.data)) {
			return fmt.Errorf("gguf: tensor %s has %d values for dims %v", t.name, len(t.data), t.dims)
		}
		g.str(t.name)
		g.write(uint32(len(t.dims)))
		for _, d := range t.dims {
			g.write(uint64(d))
		}
		g.write(ggmlTypeF32)
		g.write(offset)
		offset = alignUp(offset + 4*n)
	}
	g.pad()
	start := g.n
	for _, t := range tensors {
		for g.err == nil && uint64(g.n-start)%ggufAlignment != 0 {
			g.write(uint8(0))
		}
		g.write(t.data)
	}
	g.pad()
	if g.err != nil {
		return g.err
	}
	return g.w.Flush()
}

func alignUp(n uint64) uint64 { return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment }

func readLE[T any](r io.Reader) (T, error) {
	var v T
	err := binary.Read(r, binary.LittleEndian, &v)
	return v, err
}

// readGGUFMeta reads the header and metadata of a GGUF file back (tests check the writer
// with it). Arrays come back as []any.
func readGGUFMeta(r io.Reader) (tensorCount uint64, meta map[string]any, err error) {
	br := bufio.NewReader(r)
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KVs     uint64
	}
	if err := binary.Read(br, binary.LittleEndian, &hdr); err != nil {
		return 0, nil, err
	}
	if string(hdr.Magic[:]) != ggufMagic || hdr.Version != ggufVersion {
		return 0, nil, fmt.Errorf("gguf: magic %q version %d", hdr.Magic, hdr.Version)
	}
	readStr := func() (string, error) {
		var n uint64
		if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
			return "", err
		}
		if n > 1<<24 {
			return "", fmt.Errorf("gguf: string of %d bytes", n)
		}
		b := make([]byte, n)
		_, err := io.ReadFull(br, b)
		return string(b), err
	}
	var readVal func(typ uint32) (any, error)
	readVal = func(typ uint32) (any, error) {
		switch typ {
		case kvUint32:
			return readLE[uint32](br)
		case kvInt32:
			return readLE[int32](br)
		case kvFloat32:
			return readLE[float32](br)
		case kvBool:
			b, err := readLE[uint8](br)
			return b == 1, err
		case kvString:
			return readStr()
		case kvArray:
			var et uint32
			var n uint64
			if err := binary.Read(br, binary.LittleEndian, &et); err != nil {
				return nil, err
			}
			if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
				return nil, err
			}
			if n > 1<<20 {
				return nil, fmt.Errorf("gguf: array of %d values", n)
			}
			out := make([]any, 0, n)
			for range n {
				v, err := readVal(et)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		}
		return nil, fmt.Errorf("gguf: value type %d", typ)
	}
	meta = make(map[string]any, hdr.KVs)
	for range hdr.KVs {
		k, err := readStr()
		if err != nil {
			return 0, nil, err
		}
		var typ uint32
		if err := binary.Read(br, binary.LittleEndian, &typ); err != nil {
			return 0, nil, err
		}
		v, err := readVal(typ)
		if err != nil {
			return 0, nil, fmt.Errorf("gguf: %s: %w", k, err)
		}
		meta[k] = v
	}
	return hdr.Tensors, meta, nil
}
