package openai

import (
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// wireError mirrors the error object with encoding/json tags; AppendJSON must
// produce exactly what encoding/json makes of it.
type wireError struct {
	Error struct {
		Message               string  `json:"message"`
		Type                  string  `json:"type"`
		Param                 *string `json:"param"`
		Code                  string  `json:"code"`
		RequestID             string  `json:"request_id,omitempty"`
		PartialOutput         *bool   `json:"partial_output,omitempty"`
		DeliveredOutputTokens *int    `json:"delivered_output_tokens,omitempty"`
		Retryable             *bool   `json:"retryable,omitempty"`
	} `json:"error"`
}

func marshalReference(t *testing.T, e *Error) string {
	t.Helper()
	var w wireError
	w.Error.Message, w.Error.Type, w.Error.Code = e.Message, e.Type, e.Code
	if e.Param != "" {
		w.Error.Param = &e.Param
	}
	w.Error.RequestID = e.RequestID
	w.Error.PartialOutput, w.Error.DeliveredOutputTokens, w.Error.Retryable = e.PartialOutput, e.DeliveredOutputTokens, e.Retryable
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	tricky := []string{
		"", "plain", `quote " and backslash \`, "newline\n tab\t cr\r bs\b ff\f",
		"\x00\x01\x1f\x7f", "<script>&amp;</script>", "line\u2028para\u2029end",
		"bad utf8 \xff\xfe mid \xe2\x82 end", "héllo wörld ✓ 🎉", "\xed\xa0\x80 surrogate half",
		strings.Repeat("x", 600),
	}
	for _, s := range tricky {
		e := &Error{Message: s, Type: s, Param: s, Code: s, RequestID: s}
		if got, want := string(e.AppendJSON(nil)), marshalReference(t, e); got != want {
			t.Errorf("AppendJSON(%q):\n got %s\nwant %s", s, got, want)
		}
	}
	// Random strings drawn from an alphabet of the characters that matter.
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\x00", "\x1f", "\x7f",
		"é", "✓", "🎉", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x82", "\ufffd"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(20) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		e := &Error{Message: b.String(), Code: "c"}
		if got, want := string(e.AppendJSON(nil)), marshalReference(t, e); got != want {
			t.Fatalf("AppendJSON(%q):\n got %s\nwant %s", b.String(), got, want)
		}
	}
}

func TestAppendJSONShape(t *testing.T) {
	e := &Error{
		Message: "generation interrupted after part of the answer was sent", Type: TypeUpstream,
		Code: "upstream_decode_interrupted", RequestID: "req_01JABC",
		PartialOutput: ptr(true), DeliveredOutputTokens: ptr(37), Retryable: ptr(false), Status: 502,
	}
	want := `{"error":{"message":"generation interrupted after part of the answer was sent","type":"upstream_error","param":null,"code":"upstream_decode_interrupted","request_id":"req_01JABC","partial_output":true,"delivered_output_tokens":37,"retryable":false}}`
	if got := string(e.AppendJSON(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	minimal := &Error{Message: "m", Type: "t"}
	if got := string(minimal.AppendJSON([]byte("x"))); got != `x{"error":{"message":"m","type":"t","param":null,"code":""}}` {
		t.Fatalf("minimal: %s", got)
	}
	if got := e.Error(); got != "upstream_decode_interrupted: generation interrupted after part of the answer was sent" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestErrorRoundTrip(t *testing.T) {
	cases := []*Error{
		{Message: "m", Type: "t", Code: "c"},
		{Message: "m", Type: "t", Param: "messages[0].role", Code: "c", RequestID: "req_1",
			PartialOutput: ptr(false), DeliveredOutputTokens: ptr(0), Retryable: ptr(true)},
		{Message: "é\n<\u2028", Type: TypeUpstream, Code: "upstream_decode_interrupted",
			PartialOutput: ptr(true), DeliveredOutputTokens: ptr(123456), Retryable: ptr(false)},
	}
	for _, in := range cases {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(in.AppendJSON(nil)) {
			t.Fatalf("json.Marshal %s differs from AppendJSON %s", b, in.AppendJSON(nil))
		}
		var out Error
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if got, want := string(out.AppendJSON(nil)), string(b); got != want {
			t.Fatalf("round trip:\n got %s\nwant %s", got, want)
		}
		if (in.PartialOutput == nil) != (out.PartialOutput == nil) || (in.Retryable == nil) != (out.Retryable == nil) ||
			(in.DeliveredOutputTokens == nil) != (out.DeliveredOutputTokens == nil) {
			t.Fatalf("extension presence lost: %+v -> %+v", in, out)
		}
	}
	// Held by value inside another document, it keeps the same shape.
	doc, err := json.Marshal(struct{ Err Error }{Err: *cases[1]})
	if err != nil || string(doc) != `{"Err":`+string(cases[1].AppendJSON(nil))+`}` {
		t.Fatalf("embedded by value: %s %v", doc, err)
	}
	var e Error
	if err := json.Unmarshal([]byte(`{"error":{"message":"x","code":400}}`), &e); err != nil || e.Code != "400" {
		t.Fatalf("numeric code: %v %q", err, e.Code)
	}
	if err := json.Unmarshal([]byte(`{"detail":"x"}`), &e); err == nil {
		t.Fatal("body without error member decoded without error")
	}
}

func TestWriteError(t *testing.T) {
	cases := []struct {
		e      *Error
		status int
	}{
		{&Error{Message: "no", Type: TypeRateLimit, Code: "rate_limit_exceeded", Status: 429}, 429},
		{&Error{Message: "unset status"}, 500},
		{&Error{Message: "not an error status", Status: 200}, 500},
		{nil, 500},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		WriteError(rec, tc.e)
		if rec.Code != tc.status {
			t.Errorf("status %d, want %d", rec.Code, tc.status)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var back Error
		if err := json.Unmarshal(rec.Body.Bytes(), &back); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
		if tc.e != nil && back.Message != tc.e.Message {
			t.Errorf("message %q, want %q", back.Message, tc.e.Message)
		}
		if !utf8.Valid(rec.Body.Bytes()) {
			t.Error("body is not UTF-8")
		}
	}
}

// x-should-retry is the error's retryable when it says one, else its code's entry in
// docs/errors.md (unknown codes: false), and false on a replayed answer.
func TestWriteErrorRetryHeader(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		code      string
		retryable *bool
		replayed  bool
		want      string
	}{
		{"upstream_unavailable", &no, false, "false"},
		{"upstream_unavailable", &yes, false, "true"},
		{"upstream_unavailable", &yes, true, "false"},
		{"no_healthy_replica", nil, false, "true"},
		{"idempotency_key_cancelled", nil, false, "false"},
		{"no_such_code", nil, false, "false"},
	} {
		rec := httptest.NewRecorder()
		if tc.replayed {
			rec.Header().Set("Idempotent-Replayed", "true")
		}
		WriteError(rec, &Error{Message: "m", Code: tc.code, Status: 502, Retryable: tc.retryable})
		if got := rec.Header().Get("X-Should-Retry"); got != tc.want {
			t.Errorf("%s, retryable %v, replayed %v: X-Should-Retry %q, want %q", tc.code, tc.retryable, tc.replayed, got, tc.want)
		}
	}
}
