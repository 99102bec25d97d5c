package kvevents

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// EncodeBatch encodes b as vLLM 0.11 publishes a KVEventBatch: msgspec's positional
// encoding (array_like=True, tag=True, omit_defaults=True) — [ts, events,
// data_parallel_rank], each event [tag, fields…] — with integer block hashes
// (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, the default): BlockStored as [tag, block_hashes,
// parent_block_hash, token_ids, block_size, lora_id (nil), medium], BlockRemoved as [tag,
// block_hashes, medium], AllBlocksCleared as [tag]. Integers take their smallest msgpack
// form and floats eight bytes, as msgspec writes them. It is what the simulator publishes;
// a Hash of other than eight bytes is written as bytes, as vLLM writes a digest.
func EncodeBatch(b Batch) ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	err := e.EncodeArrayLen(3)
	if err == nil {
		err = e.EncodeFloat64(b.TS)
	}
	if err == nil {
		err = e.EncodeArrayLen(len(b.Events))
	}
	for _, ev := range b.Events {
		if err != nil {
			break
		}
		err = encodeEvent(e, ev)
	}
	if err == nil {
		if b.DPRank < 0 {
			err = e.EncodeNil()
		} else {
			err = e.EncodeInt(int64(b.DPRank))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("encoding a kv event batch: %w", err)
	}
	return buf.Bytes(), nil
}

func encodeEvent(e *msgpack.Encoder, ev Event) error {
	switch ev.Kind {
	case Stored:
		return all(e.EncodeArrayLen(7), e.EncodeString("BlockStored"), encodeHashes(e, ev.Hashes),
			encodeOptionalHash(e, ev.Parent), encodeTokens(e, ev.TokenIDs), e.EncodeInt(int64(ev.BlockSize)),
			e.EncodeNil(), encodeMedium(e, ev.Medium))
	case Removed:
		return all(e.EncodeArrayLen(3), e.EncodeString("BlockRemoved"), encodeHashes(e, ev.Hashes),
			encodeMedium(e, ev.Medium))
	case Cleared:
		return all(e.EncodeArrayLen(1), e.EncodeString("AllBlocksCleared"))
	}
	return fmt.Errorf("event kind %d", ev.Kind)
}

// all returns the first error of calls made in order (each has run by then).
func all(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func encodeHashes(e *msgpack.Encoder, hs []Hash) error {
	if err := e.EncodeArrayLen(len(hs)); err != nil {
		return err
	}
	for _, h := range hs {
		if err := encodeOptionalHash(e, h); err != nil {
			return err
		}
	}
	return nil
}

func encodeOptionalHash(e *msgpack.Encoder, h Hash) error {
	switch len(h) {
	case 0:
		return e.EncodeNil()
	case 8:
		return e.EncodeUint(binary.BigEndian.Uint64([]byte(h)))
	}
	return e.EncodeBytes([]byte(h))
}

func encodeTokens(e *msgpack.Encoder, ids []uint32) error {
	if err := e.EncodeArrayLen(len(ids)); err != nil {
		return err
	}
	for _, id := range ids {
		if err := e.EncodeUint(uint64(id)); err != nil {
			return err
		}
	}
	return nil
}

func encodeMedium(e *msgpack.Encoder, m string) error {
	if m == "" {
		return e.EncodeNil()
	}
	return e.EncodeString(m)
}
