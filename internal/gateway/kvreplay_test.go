package gateway

import (
	"encoding/binary"
	"testing"
)

// A replay's answer is read in both of vLLM's framings, as the DEALER receives them (the
// ROUTER's empty delimiter first): [seq, batch] and its end [-1, ""] up to 0.25;
// [topic, seq, batch] and its end ["", -1, ""] from 0.26 (vLLM's
// `_service_replay`), the topic empty (vLLM's default) or not.
func TestParseKVReplayBothFramings(t *testing.T) {
	seqBytes := func(seq int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(seq)) }
	seven, end := seqBytes(7), seqBytes(-1)
	batch := []byte{0x92}
	for _, c := range []struct {
		name    string
		frames  [][]byte
		seq     int64
		payload []byte
	}{
		{"0.25 batch", [][]byte{{}, seven, batch}, 7, batch},
		{"0.25 end", [][]byte{{}, end, {}}, -1, nil},
		{"0.26 batch", [][]byte{{}, []byte("kv"), seven, batch}, 7, batch},
		{"0.26 batch, empty topic", [][]byte{{}, {}, seven, batch}, 7, batch},
		{"0.26 end", [][]byte{{}, {}, end, {}}, -1, nil},
		{"0.26 without the delimiter", [][]byte{[]byte("kv"), seven, batch}, 7, batch},
	} {
		seq, payload, err := parseKVReplay(c.frames)
		if err != nil || seq != c.seq || string(payload) != string(c.payload) {
			t.Errorf("%s: %d, %x, %v; want %d, %x", c.name, seq, payload, err, c.seq, c.payload)
		}
	}
	for _, frames := range [][][]byte{
		{{}, []byte("short"), batch},                  // not an 8-byte sequence number
		{{}, []byte("kv"), []byte("x"), seven, batch}, // too many frames
		{seven},
	} {
		if _, _, err := parseKVReplay(frames); err == nil {
			t.Errorf("%q: no error", frames)
		}
	}
}
