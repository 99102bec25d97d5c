package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// DecodeBatch decodes the msgpack payload of one published message, a vLLM KVEventBatch
// as msgspec encodes it, or SGLang's, which is vLLM's positional form (its batch's third
// field is its attention data-parallel rank). Both encodings vLLM has used are read:
//
//   - positional (msgspec array_like=True): the batch is [ts, events, data_parallel_rank]
//     (the rank left out by versions before it existed, or when it is None) and each
//     event is [tag, field, ...] with the fields in declaration order — BlockStored:
//     block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name,
//     extra_keys, …; BlockRemoved: block_hashes, medium, …; AllBlocksCleared: none.
//     Trailing fields equal to their default are left out (omit_defaults);
//   - named (vLLM's PR 42892, in releases after 0.23): each event is a map holding its
//     tag under "type" and its fields by name, and the batch a map of ts, events and
//     data_parallel_rank or still positional.
//
// Fields this package does not use are skipped, whatever their type, so fields added
// later do not break decoding; a tag it does not know is an error, since an event it
// cannot account for would make its count of the engine's cache wrong.
func DecodeBatch(payload []byte) (Batch, error) {
	d := msgpack.NewDecoder(bytes.NewReader(payload))
	b := Batch{DPRank: -1}
	c, err := d.PeekCode()
	if err != nil {
		return b, fmt.Errorf("kv event batch: %w", err)
	}
	switch {
	case isArray(c):
		err = decodeBatchArray(d, &b)
	case isMap(c):
		err = decodeBatchMap(d, &b)
	default:
		err = fmt.Errorf("a batch is an array or a map, not msgpack code %#x", c)
	}
	if err != nil {
		return b, fmt.Errorf("kv event batch: %w", err)
	}
	if _, err := d.PeekCode(); !errors.Is(err, io.EOF) {
		return b, fmt.Errorf("kv event batch: bytes after the batch")
	}
	return b, nil
}

func decodeBatchArray(d *msgpack.Decoder, b *Batch) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return fmt.Errorf("a batch array has %d elements, want at least ts and events", n)
	}
	if b.TS, err = d.DecodeFloat64(); err != nil {
		return fmt.Errorf("ts: %w", err)
	}
	if b.Events, err = decodeEvents(d); err != nil {
		return err
	}
	if n >= 3 {
		if b.DPRank, err = decodeOptionalInt(d); err != nil {
			return fmt.Errorf("data_parallel_rank: %w", err)
		}
	}
	return skipN(d, n-3)
}

func decodeBatchMap(d *msgpack.Decoder, b *Batch) error {
	n, err := d.DecodeMapLen()
	if err != nil {
		return err
	}
	seen := false
	for range n {
		key, err := d.DecodeString()
		if err != nil {
			return fmt.Errorf("batch key: %w", err)
		}
		switch key {
		case "ts":
			b.TS, err = d.DecodeFloat64()
		case "events":
			b.Events, err = decodeEvents(d)
			seen = true
		case "data_parallel_rank":
			b.DPRank, err = decodeOptionalInt(d)
		default:
			err = d.Skip()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if !seen {
		return fmt.Errorf("a batch map has no events")
	}
	return nil
}

func decodeEvents(d *msgpack.Decoder) ([]Event, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	out := make([]Event, 0, max(n, 0))
	for i := range n {
		e, err := decodeEvent(d)
		if err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// eventFields are the positional fields of each tag, in vLLM's declaration order, as far
// as this package reads them ("" : skipped).
var eventFields = map[string][]string{
	"BlockStored": {"block_hashes", "parent_block_hash", "token_ids", "block_size", "", "medium",
		"", "", "group_idx", "kv_cache_spec_kind"}, // lora_id, lora_name and extra_keys skipped
	"BlockRemoved":     {"block_hashes", "medium", "group_idx"},
	"AllBlocksCleared": {},
}

var tagKinds = map[string]Kind{"BlockStored": Stored, "BlockRemoved": Removed, "AllBlocksCleared": Cleared}

func decodeEvent(d *msgpack.Decoder) (Event, error) {
	c, err := d.PeekCode()
	if err != nil {
		return Event{}, err
	}
	switch {
	case isArray(c):
		return decodeEventArray(d)
	case isMap(c):
		return decodeEventMap(d)
	}
	return Event{}, fmt.Errorf("an event is an array or a map, not msgpack code %#x", c)
}

func decodeEventArray(d *msgpack.Decoder) (Event, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return Event{}, err
	}
	if n < 1 {
		return Event{}, fmt.Errorf("an event array without its tag")
	}
	tag, err := d.DecodeString()
	if err != nil {
		return Event{}, fmt.Errorf("tag: %w", err)
	}
	e, fields, err := newEvent(tag)
	if err != nil {
		return e, err
	}
	for i := 1; i < n; i++ {
		name := ""
		if i-1 < len(fields) {
			name = fields[i-1]
		}
		if err := decodeField(d, &e, name); err != nil {
			return e, fmt.Errorf("%s field %d (%s): %w", tag, i-1, name, err)
		}
	}
	return e, nil
}

func decodeEventMap(d *msgpack.Decoder) (Event, error) {
	n, err := d.DecodeMapLen()
	if err != nil {
		return Event{}, err
	}
	// The tag may come anywhere: fields are decoded by name and the tag checked last.
	var e Event
	tag := ""
	for range n {
		key, err := d.DecodeString()
		if err != nil {
			return e, fmt.Errorf("event key: %w", err)
		}
		if key == "type" {
			if tag, err = d.DecodeString(); err != nil {
				return e, fmt.Errorf("type: %w", err)
			}
			continue
		}
		name := key
		if name == "lora_id" {
			name = ""
		}
		if err := decodeField(d, &e, name); err != nil {
			return e, fmt.Errorf("%s: %w", key, err)
		}
	}
	k, fields, err := newEvent(tag)
	if err != nil {
		return e, err
	}
	e.Kind = k.Kind
	if len(fields) == 0 {
		return Event{Kind: k.Kind}, nil
	}
	return e, nil
}

func newEvent(tag string) (Event, []string, error) {
	k, ok := tagKinds[tag]
	if !ok {
		return Event{}, nil, fmt.Errorf("unknown event tag %q", tag)
	}
	return Event{Kind: k}, eventFields[tag], nil
}

func decodeField(d *msgpack.Decoder, e *Event, name string) error {
	var err error
	switch name {
	case "block_hashes":
		e.Hashes, err = decodeHashes(d)
	case "parent_block_hash":
		e.Parent, err = decodeHash(d)
	case "token_ids":
		e.Tokens, err = d.DecodeArrayLen()
		if err == nil {
			err = skipN(d, e.Tokens)
			e.Tokens = max(e.Tokens, 0)
		}
	case "block_size":
		e.BlockSize, err = d.DecodeInt()
	case "medium":
		e.Medium, err = decodeOptionalString(d)
	case "group_idx":
		e.Group, err = decodeOptionalInt(d)
		e.HasGroup = err == nil && e.Group >= 0
		e.Group = max(e.Group, 0)
	case "kv_cache_spec_kind":
		e.GroupKind, err = decodeOptionalString(d)
	default:
		err = d.Skip()
	}
	return err
}

func decodeHashes(d *msgpack.Decoder) ([]Hash, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	out := make([]Hash, 0, max(n, 0))
	for range n {
		h, err := decodeHash(d)
		if err != nil {
			return nil, err
		}
		if h == "" {
			return nil, fmt.Errorf("a block hash is nil")
		}
		out = append(out, h)
	}
	return out, nil
}

// decodeHash reads a block hash: an integer, signed or not, or bytes; nil is "".
func decodeHash(d *msgpack.Decoder) (Hash, error) {
	v, err := d.DecodeInterfaceLoose()
	if err != nil {
		return "", err
	}
	var b [8]byte
	switch h := v.(type) {
	case nil:
		return "", nil
	case int64:
		binary.BigEndian.PutUint64(b[:], uint64(h))
	case uint64:
		binary.BigEndian.PutUint64(b[:], h)
	case string: // msgpack bin or str, as DecodeInterfaceLoose returns both
		if h == "" {
			return "", fmt.Errorf("an empty block hash")
		}
		return Hash(h), nil
	default:
		return "", fmt.Errorf("a block hash is a %T", v)
	}
	return Hash(b[:]), nil
}

// IntHash is the Hash of an integer block hash.
func IntHash(h uint64) Hash {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	return Hash(b[:])
}

func decodeOptionalInt(d *msgpack.Decoder) (int, error) {
	c, err := d.PeekCode()
	if err != nil {
		return -1, err
	}
	if c == msgpcode.Nil {
		return -1, d.DecodeNil()
	}
	return d.DecodeInt()
}

func decodeOptionalString(d *msgpack.Decoder) (string, error) {
	c, err := d.PeekCode()
	if err != nil {
		return "", err
	}
	if c == msgpcode.Nil {
		return "", d.DecodeNil()
	}
	return d.DecodeString()
}

func skipN(d *msgpack.Decoder, n int) error {
	for range n {
		if err := d.Skip(); err != nil {
			return err
		}
	}
	return nil
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}
