package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// The single-pass parser must decide every body as the encoding/json parser it
// replaced decides it (reference_test.go): the same acceptance, the same error to the
// byte, the same fields. Prompt is the reference's prompt cut to the prefix asked for,
// and PromptOmitted what was cut. Members are the top-level members as encoding/json
// reads them.
func compareParse(t *testing.T, ep Endpoint, limit int, body []byte) {
	t.Helper()
	in := bytes.Clone(body)
	want, wantErr := refParseRequest(ep, body)
	got, members, gotErr := Parse(ep, body, limit)
	if !bytes.Equal(in, body) {
		t.Fatalf("%v: Parse changed its input", ep)
	}
	compareRead(t, ep, limit, body, got, members, gotErr)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%v %q: reference error %v, Parse error %v", ep, body, wantErr, gotErr)
	}
	if wantErr != nil {
		if *wantErr != *gotErr || got != nil || members != nil {
			t.Fatalf("%v %q:\nreference %+v\nParse     %+v", ep, body, *wantErr, *gotErr)
		}
		return
	}
	if &got.Body[0] != &body[0] || len(got.Body) != len(body) {
		t.Fatalf("%v: Body is not the original slice", ep)
	}
	keep := min(max(limit, 0), len(want.Prompt))
	if got.Prompt != want.Prompt[:keep] || got.PromptOmitted != len(want.Prompt)-keep {
		t.Fatalf("%v %q, prefix %d: prompt %q (+%d omitted), want %q of %q", ep, body, limit, got.Prompt, got.PromptOmitted, want.Prompt[:keep], want.Prompt)
	}
	g, w := *got, *want
	g.Prompt, g.PromptOmitted, g.Body = "", 0, nil
	w.Prompt, w.Body = "", nil
	if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
		t.Fatalf("%v %q:\nreference %+v\nParse     %+v", ep, body, w, g)
	}
	wantMembers := topLevelMembers(t, body)
	if len(members) != len(wantMembers) {
		t.Fatalf("%v %q: members %v, want %v", ep, body, members, wantMembers)
	}
	for i := range members {
		m := members[i]
		if m.Name != wantMembers[i].Name || !bytes.Equal(m.Value, wantMembers[i].Value) || &body[m.Offset] != &m.Value[0] {
			t.Fatalf("%v %q: member %d is %q: %s, want %q: %s", ep, body, i, members[i].Name, members[i].Value, wantMembers[i].Name, wantMembers[i].Value)
		}
	}
}

// compareRead checks that ReadRequest, given the body in pieces of every size, decides
// as Parse did.
func compareRead(t *testing.T, ep Endpoint, limit int, body []byte, want *Request, wantMembers Members, wantErr *Error) {
	t.Helper()
	for _, pieces := range []func(io.Reader) io.Reader{iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader, func(r io.Reader) io.Reader { return r }} {
		got, members, err := ReadRequest(ep, pieces(bytes.NewReader(body)), len(body), limit)
		if wantErr != nil {
			if e, ok := err.(*Error); !ok || *e != *wantErr || got != nil {
				t.Fatalf("%v %q: ReadRequest %v, Parse %v", ep, body, err, wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v %q: ReadRequest %v, Parse accepted it", ep, body, err)
		}
		if !bytes.Equal(got.Body, body) || fmt.Sprintf("%+v", members) != fmt.Sprintf("%+v", wantMembers) {
			t.Fatalf("%v %q: ReadRequest read %q with members %+v", ep, body, got.Body, members)
		}
		g, w := *got, *want
		g.Body, w.Body = nil, nil
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
			t.Fatalf("%v %q:\nReadRequest %+v\nParse       %+v", ep, body, g, w)
		}
	}
}

// A body that cannot be read to its end is a read error, whatever it holds: the
// reader's error, or io.ErrUnexpectedEOF when it is shorter than it said.
func TestReadRequestReadErrors(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hé 東京 😀 \ud83d\ude00 \n 12.5e3"}],"n":-1.5e+2,"stream":x}`)
	boom := errors.New("boom")
	for n := 0; n < len(body); n++ {
		_, _, err := ReadRequest(Chat, iotest.TimeoutReader(io.MultiReader(bytes.NewReader(body[:n]), iotest.ErrReader(boom))), len(body), 64)
		if err != boom && err != iotest.ErrTimeout {
			t.Fatalf("cut after %d bytes by an error: %v", n, err)
		}
		_, _, err = ReadRequest(Chat, bytes.NewReader(body[:n]), len(body), 64)
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("ending after %d bytes: %v", n, err)
		}
	}
	if _, _, err := ReadRequest(Chat, bytes.NewReader(body), len(body), 64); err == nil || err.(*Error).Param != "" || err.(*Error).Code != "invalid_json" {
		t.Fatalf("the whole body: %v", err)
	}
}

// topLevelMembers reads an object's members with encoding/json.
func topLevelMembers(t *testing.T, body []byte) Members {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var ms Members
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, Member{Name: tok.(string), Value: v})
	}
	return ms
}

// differentialSeeds are bodies at the edges of what the two parsers must agree on.
var differentialSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5,"n":2,"stream_options":{"include_usage":true}}`,
	`{"model":"m","messages":[{"content":"first","role":"system"},{"role":"user","content":"a","content":"b"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"TYPE":"text","Text":"b"},{"text":"c"},null,{"type":"image_url"},{"type":"input_text","text":"d","text":null},{"text":null,"text":"e"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":7,"text":"b"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},"b"]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":null,"text":"a"},{"type":"","text":"b"},{"type":"output_text","text":"c"},{"type":"tex\u0074","t\u0065xt":"d"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":{"text":"x"}},{"role":"tool","content":5},{"role":"assistant","content":null}]}`,
	`{"model":"m","messages":[{"role":"us\u0065r","content":"\ud83d\ude00 \ud800 \udc00\u0041 \ud800\u0041 \u00e9\n\t\"\\\/"}]}`,
	`{"model":"m","messages":[{"role":null,"content":"x"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"},3,{"role":1}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"},{"role":1},3]}`,
	`{"model":"m","prompt":["a",null,"b"],"n":3}`,
	`{"model":"m","prompt":[null]}`, `{"model":"m","prompt":[1,null,-0,9223372036854775807]}`,
	`{"model":"m","prompt":[1,9223372036854775808]}`, `{"model":"m","prompt":[1.0]}`, `{"model":"m","prompt":[1e2]}`,
	`{"model":"m","prompt":[[1],null,[],[null,2]]}`, `{"model":"m","prompt":[[1],[1.5]]}`, `{"model":"m","prompt":[["a"]]}`,
	`{"model":"m","prompt":[{"a":1}]}`, `{"model":"m","prompt":[true]}`, `{"model":"m","prompt":"x","n":1024}`,
	`{"model":"m","max_tokens":16,"system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"system":"late system"}`,
	`{"model":"m","max_tokens":16,"system":{"a":1},"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":16,"system":[1],"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"},{"role":"assistant"}]}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":3}]}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"usr","content":"x"}]}`,
	`{"model":"m","input":[{"role":"user","content":"x"},{"type":"function_call_output","output":"o"},{"role":"","type":"message","content":[{"type":"input_text","text":"t"}]},{"role":5,"type":6}],"max_output_tokens":4,"previous_response_id":"resp_1","store":false}`,
	`{"model":"m","input":"Hi","instructions":"Be brief."}`, `{"model":"m","input":"Hi","instructions":5}`,
	`{"model":"m","input":[1]}`, `{"model":"m","input":{}}`, `{"model":"m","input":[],"previous_response_id":""}`,
	`{"model":"m","input":"x","previous_response_id":""}`, `{"model":"m","input":"x","store":"no"}`,
	`{"model":"m","input":["a","b"],"encoding_format":"float"}`, `{"model":"m","input":[[1,2]],"encoding_format":5}`,
	`{"model":"m","input":"x","encoding_format":"base64","stream":false}`,
	`{"model":"m","model":"n","messages":[]}`, `{"model":"a","mod\u0065l":"b"}`, `{"\ud800\u0041":1,"\ud800\u0042":2,"model":"m"}`,
	`{"\ud800":1,"\udfff":2}`, `{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`,
	"{\"model\":\"m\xff\"}", "{\"model\":\"m\"}\xff", "\xef\xbb\xbf{}", "\u00a0{}", "{\"a\":\u00e9}",
	strings.Repeat("[", 200) + strings.Repeat("]", 200), `{"a":x,"b":` + strings.Repeat("[", 130) + strings.Repeat("]", 130) + `}`,
	`{"model":"m","max_tokens":-1}`, `{"model":"m","max_tokens":1e400}`, `{"model":"m","max_tokens":99999999999}`,
	`{"model":"m","n":0}`, `[]`, `null`, ``, `   `, `{`, `{"model":1}`, `{"a":"\"}"}`, `"x"`, `1 2`, `{} x`, `{}}`,
	`{"a":tru}`, `{"a":t`, `{"a":nul`, `{"a":fals`, `{"a":-}`, `{"a":-`, `{"a":1.}`, `{"a":1.`, `{"a":1e}`, `{"a":1e+`,
	`{"a":01}`, `{"a":"\x"}`, `{"a":"\u12G4"}`, `{"a":"\u12`, `{"a":"\`, "{\"a\":\"\x01\"}", `{"a" 1}`, `{"a":1,}`,
	`{"a":[1,]}`, `{"a":[1 2]}`, `{,}`, `{"a":1`, `{"a":`, `{"a"`, `{"`, `[`, `[1`, `-1`, `1e5`, `{"model":"m","temperature":"1"}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":2.0000000001}`, `{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1e999}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true,"include_usage":"x"}}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"continuous_usage_stats":null,"include_usage":false}}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"continuous_usage_stats":0}}`,
	` { "model" : "m" , "messages" : [ { "role" : "user" , "content" : [ { "type" : "text" , "text" : "a" } ] } ] } `,
}

func TestParseMatchesReference(t *testing.T) {
	for _, s := range differentialSeeds {
		for ep := Chat; ep <= Embeddings; ep++ {
			for _, limit := range []int{0, 1, 7, 24, DefaultPromptPrefix} {
				compareParse(t, ep, limit, []byte(s))
			}
		}
	}
}

// Random request-shaped bodies and byte-level mutations of them, from a fixed seed:
// the two parsers agree on each.
func TestParseMatchesReferenceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		g := &bodyGen{rng: rng}
		ep := Endpoint(1 + rng.IntN(int(Embeddings)))
		body := g.request(ep)
		if rng.IntN(3) == 0 {
			body = mutate(rng, body)
		}
		compareParse(t, ep, []int{0, 3, 40, DefaultPromptPrefix}[rng.IntN(4)], body)
	}
}

func FuzzParseMatchesReference(f *testing.F) {
	for _, s := range differentialSeeds {
		for ep := Chat; ep <= Embeddings; ep++ {
			f.Add(byte(ep), uint16(4096), []byte(s))
		}
	}
	f.Add(byte(Chat), uint16(5), conversationBody(Chat, 4<<10))
	f.Add(byte(Messages), uint16(100), conversationBody(Messages, 4<<10))
	f.Add(byte(Responses), uint16(0), conversationBody(Responses, 4<<10))
	f.Fuzz(func(t *testing.T, epByte byte, limit uint16, body []byte) {
		ep := Endpoint(epByte%uint8(Embeddings+1-Chat)) + Chat
		compareParse(t, ep, int(limit), body)
	})
}

// bodyGen writes random JSON shaped like requests: the members each API reads, with
// values of every kind, strings with escapes, keys spelled in other cases or with
// escapes, and now and then a member given twice.
type bodyGen struct {
	rng *rand.Rand
	b   []byte
}

func (g *bodyGen) request(ep Endpoint) []byte {
	g.b = g.b[:0]
	members := map[Endpoint][]string{
		Chat:        {"model", "messages", "stream", "n", "max_tokens", "max_completion_tokens", "temperature", "stream_options", "tools", "top_k"},
		Completions: {"model", "prompt", "stream", "n", "max_tokens", "temperature", "stream_options", "echo"},
		Messages:    {"model", "max_tokens", "system", "messages", "stream", "temperature", "tools"},
		Responses:   {"model", "input", "instructions", "max_output_tokens", "stream", "temperature", "store", "previous_response_id", "tools"},
		Embeddings:  {"model", "input", "encoding_format", "stream", "dimensions"},
	}[ep]
	g.ws()
	g.b = append(g.b, '{')
	for i, name := range members {
		required := name == "model" || name == "messages" || name == "prompt" || name == "input" || name == "max_tokens" && ep == Messages
		if required && g.rng.IntN(40) == 0 || !required && g.rng.IntN(2) == 0 {
			continue // left out
		}
		if i > 0 && len(g.b) > 1 && g.b[len(g.b)-1] != '{' {
			g.b = append(g.b, ',')
		}
		g.member(name, ep)
		if g.rng.IntN(200) == 0 {
			g.b = append(g.b, ',')
			g.member(name, ep) // twice
		}
	}
	g.b = append(g.b, '}')
	g.ws()
	return g.b
}

func (g *bodyGen) ws() {
	if g.rng.IntN(4) == 0 {
		g.b = append(g.b, " \n\t\r"[:1+g.rng.IntN(4)]...)
	}
}

func (g *bodyGen) key(name string) {
	g.ws()
	switch g.rng.IntN(60) {
	case 0:
		name = strings.ToUpper(name[:1]) + name[1:]
	case 1:
		g.b = append(g.b, '"')
		g.b = fmt.Appendf(g.b, `\u%04x`, name[0])
		g.b = append(g.b, name[1:]...)
		g.b = append(g.b, '"')
		g.ws()
		g.b = append(g.b, ':')
		return
	}
	g.b = appendString(g.b, name)
	g.ws()
	g.b = append(g.b, ':')
}

func (g *bodyGen) member(name string, ep Endpoint) {
	g.key(name)
	g.ws()
	switch name {
	case "model":
		g.pickOr([]string{`"m"`, `"mo\u0064el"`}, `""`, `7`, `null`)
	case "messages":
		g.array(1+g.rng.IntN(4), func() { g.turn(ep) })
	case "input":
		switch {
		case ep == Responses && g.rng.IntN(2) == 0:
			g.array(g.rng.IntN(4), func() { g.turn(ep) })
		default:
			g.prompt()
		}
	case "prompt":
		g.prompt()
	case "system", "content":
		g.content()
	case "instructions", "previous_response_id", "encoding_format":
		g.pickOr([]string{`"x"`, `"float"`, `"base64"`, `null`}, `""`, `1`, `["x"]`)
	case "stream", "store":
		g.pickOr([]string{`true`, `false`, `null`}, `"true"`, `1`)
	case "n", "max_tokens", "max_completion_tokens", "max_output_tokens":
		g.pickOr([]string{`1`, `2`, `16.0`, `null`, `1e2`, `128`}, `0`, `-3`, `1.5`, `"4"`, `129`, `99999999999`, `1e400`)
	case "temperature":
		g.pickOr([]string{`0.7`, `1`, `0e0`, `null`, `1.5`, `2`}, `2.5`, `-0.1`, `"hot"`, `1e999`)
	case "stream_options":
		switch g.rng.IntN(8) {
		case 0:
			g.pick(`null`, `true`, `[]`)
		default:
			g.b = append(g.b, '{')
			for i, k := range []string{"include_usage", "continuous_usage_stats"} {
				if g.rng.IntN(3) == 0 {
					continue
				}
				if i > 0 && g.b[len(g.b)-1] != '{' {
					g.b = append(g.b, ',')
				}
				g.key(k)
				g.pickOr([]string{`true`, `false`, `null`}, `1`)
			}
			g.b = append(g.b, '}')
		}
	default:
		g.value(3)
	}
	g.ws()
}

func (g *bodyGen) turn(ep Endpoint) {
	if g.rng.IntN(40) == 0 {
		g.value(1)
		return
	}
	g.b = append(g.b, '{')
	keys := []string{"role", "content", "type", "tool_calls", "name"}
	g.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	first := true
	for _, k := range keys {
		if (k == "role" || k == "content") && g.rng.IntN(30) == 0 || k != "role" && k != "content" && g.rng.IntN(2) == 0 {
			continue
		}
		if !first {
			g.b = append(g.b, ',')
		}
		first = false
		g.key(k)
		switch k {
		case "role":
			g.pickOr([]string{`"user"`, `"assistant"`, `"us\u0065r"`, `"system"`, `"tool"`}, `""`, `null`, `1`)
		case "type":
			g.pickOr([]string{`"message"`, `"function_call_output"`, `""`, `null`}, `2`)
		case "content":
			g.content()
		default:
			g.value(2)
		}
	}
	g.b = append(g.b, '}')
}

func (g *bodyGen) content() {
	switch g.rng.IntN(12) {
	case 0:
		g.value(2)
	case 1, 2:
		g.str()
	default:
		g.array(g.rng.IntN(4), func() {
			if g.rng.IntN(10) == 0 {
				g.value(1)
				return
			}
			g.b = append(g.b, '{')
			first := true
			for _, k := range []string{"type", "text", "Text", "TYPE", "image_url"} {
				if g.rng.IntN(3) == 0 {
					continue
				}
				if !first {
					g.b = append(g.b, ',')
				}
				first = false
				g.key(k)
				switch strings.ToLower(k) {
				case "type":
					g.pick(`"text"`, `"input_text"`, `"output_text"`, `"image_url"`, `""`, `null`, `3`, `"te\u0078t"`)
				case "text":
					if g.rng.IntN(6) == 0 {
						g.pick(`null`, `5`, `{}`)
					} else {
						g.str()
					}
				default:
					g.value(2)
				}
			}
			g.b = append(g.b, '}')
		})
	}
}

func (g *bodyGen) prompt() {
	switch g.rng.IntN(5) {
	case 0:
		g.str()
	case 1:
		g.array(g.rng.IntN(4), g.str)
	case 2:
		g.array(g.rng.IntN(4), func() { g.pick(`1`, `-2`, `null`, `1.0`, `9223372036854775808`) })
	case 3:
		g.array(g.rng.IntN(3), func() { g.array(g.rng.IntN(3), func() { g.pick(`1`, `null`, `"a"`) }) })
	default:
		g.value(2)
	}
}

func (g *bodyGen) array(n int, elem func()) {
	g.b = append(g.b, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		elem()
		g.ws()
	}
	g.b = append(g.b, ']')
}

func (g *bodyGen) str() {
	pieces := []string{"hello", " ", "é", "日本", "😀", `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00x`, `\ud800\u0041`, `\u0000`, "<&>"}
	g.b = append(g.b, '"')
	for n := g.rng.IntN(6); n > 0; n-- {
		g.b = append(g.b, pieces[g.rng.IntN(len(pieces))]...)
	}
	g.b = append(g.b, '"')
}

func (g *bodyGen) pick(vs ...string) { g.b = append(g.b, vs[g.rng.IntN(len(vs))]...) }

// pickOr writes one of ok, or now and then one of bad.
func (g *bodyGen) pickOr(ok []string, bad ...string) {
	if g.rng.IntN(12) == 0 {
		g.pick(bad...)
		return
	}
	g.pick(ok...)
}

func (g *bodyGen) value(depth int) {
	k := g.rng.IntN(7)
	if depth <= 0 {
		k %= 4
	}
	switch k {
	case 0:
		g.str()
	case 1:
		g.pick(`0`, `-1.5e3`, `12`, `1E+2`)
	case 2:
		g.pick(`true`, `false`)
	case 3:
		g.b = append(g.b, "null"...)
	case 4, 5:
		g.array(g.rng.IntN(3), func() { g.value(depth - 1) })
	default:
		g.b = append(g.b, '{')
		for i := g.rng.IntN(3); i > 0; i-- {
			g.b = appendString(g.b, []string{"a", "b", "type", "text"}[g.rng.IntN(4)])
			g.b = append(g.b, ':')
			g.value(depth - 1)
			if i > 1 {
				g.b = append(g.b, ',')
			}
		}
		g.b = append(g.b, '}')
	}
}

// mutate damages a body as a broken client or a hostile one might.
func mutate(rng *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) == 0 {
		return b
	}
	for n := 1 + rng.IntN(3); n > 0; n-- {
		i := rng.IntN(len(b))
		switch rng.IntN(5) {
		case 0:
			b = b[:i] // cut short
		case 1:
			const set = "\"\\{}[],:ntf0-.eEu \xff\x01"
			b[i] = set[rng.IntN(len(set))]
		case 2:
			b = append(b[:i], b[i+1:]...)
		case 3:
			ins := []string{`"`, `\`, `,`, `]`, `}`, `{`, `[`, `\u`, "\xc3", "é", `null`}[rng.IntN(11)]
			b = append(b[:i], append([]byte(ins), b[i:]...)...)
		default:
			b[i] ^= 1 << rng.IntN(8)
		}
		if len(b) == 0 {
			break
		}
	}
	return b
}
