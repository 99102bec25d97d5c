package request

import (
	"bytes"
	"io"
	"net"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/tidwall/sjson"
)

// engineBody is what an attempt sends to its engine: the client's body, or the client's
// body with one member replaced or added. It is held as slices of the client's bytes
// around the new part, so that however large the body, a changed one costs only its
// change: a request's memory stays its body (docs/design.md §9).
type engineBody struct {
	parts [3][]byte
}

// clientBody is the client's body sent as it came.
func clientBody(b []byte) engineBody { return engineBody{parts: [3][]byte{b}} }

// size is the body's length in bytes.
func (b engineBody) size() int { return len(b.parts[0]) + len(b.parts[1]) + len(b.parts[2]) }

// reader reads the body from its start; each call gives a new reader.
func (b engineBody) reader() io.Reader {
	if len(b.parts[1]) == 0 && len(b.parts[2]) == 0 {
		return bytes.NewReader(b.parts[0])
	}
	bufs := make(net.Buffers, 0, len(b.parts))
	for _, p := range b.parts {
		if len(p) > 0 {
			bufs = append(bufs, p)
		}
	}
	return &bufs
}

// bytes joins the body (a copy, when it was changed), for a trace.
func (b engineBody) bytes() []byte {
	if len(b.parts[1]) == 0 && len(b.parts[2]) == 0 {
		return b.parts[0]
	}
	return bytes.Join(b.parts[:], nil)
}

// usageOptions is stream_options asking for usage in every chunk, for a body that had none.
var usageOptions = []byte(`{"include_usage":true,"continuous_usage_stats":true}`)

// withUsage is the body asking the engine for usage in every chunk: stream_options with
// include_usage and continuous_usage_stats set, the client's other stream options kept.
// Only the stream_options member is written anew; the rest are the client's bytes.
// members are the body's top-level members (Parse). Options that name nothing but the
// two — the OpenAI SDKs' {"include_usage": true}, the common case — are replaced whole
// by usageOptions, so that a key given twice or escaped leaves no second, contrary value
// for the engine's parser to read last; others are rewritten with sjson, as a value of
// their own.
func withUsage(body []byte, members openai.Members) (engineBody, error) {
	set := func(opts []byte) ([]byte, error) {
		b, err := sjson.SetBytes(opts, "include_usage", true)
		if err == nil {
			b, err = sjson.SetBytes(b, "continuous_usage_stats", true)
		}
		return b, err
	}
	for _, m := range members {
		if m.Name != "stream_options" {
			continue
		}
		opts := usageOptions
		if !openai.NamesOnly(m.Value, "include_usage", "continuous_usage_stats") {
			var err error
			if opts, err = set(bytes.Clone(m.Value)); err != nil {
				return engineBody{}, err
			}
		}
		end := m.Offset + len(m.Value)
		return engineBody{parts: [3][]byte{body[:m.Offset], opts, body[end:]}}, nil
	}
	// Added as the last member, right before the closing brace: the options are always the
	// same then, written without sjson (whose frames, on the path that sends an attempt,
	// were the deepest a streaming request's stack went).
	opts := usageOptions
	end := bytes.LastIndexByte(body, '}')
	member := make([]byte, 0, len(opts)+len(`,"stream_options":`))
	if len(members) > 0 {
		member = append(member, ',')
	}
	member = append(append(member, `"stream_options":`...), opts...)
	return engineBody{parts: [3][]byte{body[:end], member, body[end:]}}, nil
}
