package agent

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// FingerprintContent is the fingerprint key of the model directory's digest.
const FingerprintContent = "content_sha256"

// contentFiles are the files of a model directory (a Hugging Face snapshot) that decide what
// the engine answers besides the tensors themselves: the architecture and its settings, the
// tokenizer and its special tokens, the chat template (inside tokenizer_config.json or on
// its own), the default sampling settings, and the weight index, which names every tensor
// and the file it is in. README files, licences, and the weight shards are left out: they
// are either irrelevant or too large to read at every start, and the index changes with
// any change of layout.
var contentFiles = []string{
	"config.json", "generation_config.json", "preprocessor_config.json",
	"tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
	"added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
	"chat_template.jinja", "chat_template.json",
	"model.safetensors.index.json", "pytorch_model.bin.index.json",
}

// maxGGUFHead bounds what is read of a GGUF file: its header, metadata (where the tokenizer
// and the chat template live) and tensor infos are a few megabytes even for large
// vocabularies; a file claiming more is not read further.
const maxGGUFHead = 256 << 20

// ContentDigest is the digest of what decides a model directory's answers: the SHA-256 of
// one line per file found ("name sha256-of-its-content"), in name order, over the files of
// contentFiles and, for each .gguf file, its header, metadata and tensor infos but not its
// tensor data. It also returns the names it hashed. A directory with none of these files
// is an error: a digest of nothing would match any other empty directory.
func ContentDigest(dir string) (string, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, fmt.Errorf("model directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if n := e.Name(); slices.Contains(contentFiles, n) || strings.HasSuffix(n, ".gguf") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "", nil, fmt.Errorf("model directory %s: none of the files that decide answers (config.json, tokenizer files, *.gguf)", dir)
	}
	slices.Sort(names)
	total := sha256.New()
	for _, n := range names {
		sum, err := fileDigest(filepath.Join(dir, n))
		if err != nil {
			return "", nil, fmt.Errorf("model directory: %s: %w", n, err)
		}
		fmt.Fprintf(total, "%s %s\n", n, sum)
	}
	return hex.EncodeToString(total.Sum(nil)), names, nil
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if strings.HasSuffix(path, ".gguf") {
		err = ggufHead(bufio.NewReader(f), h)
	} else {
		_, err = io.Copy(h, f)
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ggufHead copies a GGUF file's head to w: magic, version, counts, every metadata pair and
// every tensor info (name, dimensions, type, offset), stopping where the tensor data
// begins (ggml's docs/gguf.md, versions 2 and 3; little-endian).
func ggufHead(r io.Reader, w io.Writer) error {
	g := &ggufReader{r: io.TeeReader(io.LimitReader(r, maxGGUFHead), w)}
	var magic [4]byte
	g.read(magic[:])
	if g.err == nil && string(magic[:]) != "GGUF" {
		return errors.New("not a GGUF file")
	}
	if v := g.u32(); g.err == nil && v != 2 && v != 3 {
		return fmt.Errorf("GGUF version %d is not 2 or 3", v)
	}
	tensors, kvs := g.u64(), g.u64()
	for i := uint64(0); i < kvs && g.err == nil; i++ {
		g.str()
		g.value(g.u32(), 0)
	}
	for i := uint64(0); i < tensors && g.err == nil; i++ {
		g.str()
		dims := g.u32()
		for j := uint32(0); j < dims && g.err == nil; j++ {
			g.u64()
		}
		g.u32() // type
		g.u64() // offset
	}
	if errors.Is(g.err, io.EOF) || errors.Is(g.err, io.ErrUnexpectedEOF) {
		return errors.New("GGUF head is truncated or larger than 256 MiB")
	}
	return g.err
}

type ggufReader struct {
	r   io.Reader
	err error
	buf [8]byte
}

func (g *ggufReader) read(b []byte) {
	if g.err == nil {
		_, g.err = io.ReadFull(g.r, b)
	}
}

func (g *ggufReader) u32() uint32 {
	g.read(g.buf[:4])
	if g.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(g.buf[:4])
}

func (g *ggufReader) u64() uint64 {
	g.read(g.buf[:8])
	if g.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(g.buf[:8])
}

func (g *ggufReader) skip(n uint64) {
	if g.err == nil {
		var k int64
		k, g.err = io.CopyN(io.Discard, g.r, int64(n))
		if g.err == nil && uint64(k) != n {
			g.err = io.ErrUnexpectedEOF
		}
	}
}

func (g *ggufReader) str() { g.skip(g.u64()) }

// value skips one metadata value of type t; arrays nest at most a few levels in practice,
// and a deeper one is refused rather than followed.
func (g *ggufReader) value(t uint32, depth int) {
	sizes := map[uint32]uint64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	switch {
	case g.err != nil:
	case t == 8:
		g.str()
	case t == 9:
		et, n := g.u32(), g.u64()
		if depth > 4 {
			g.err = errors.New("GGUF arrays nest too deep")
			return
		}
		if size, ok := sizes[et]; ok {
			g.skip(n * size)
			return
		}
		for i := uint64(0); i < n && g.err == nil; i++ {
			g.value(et, depth+1)
		}
	default:
		size, ok := sizes[t]
		if !ok {
			g.err = fmt.Errorf("GGUF metadata type %d is unknown", t)
			return
		}
		g.skip(size)
	}
}
