package openai

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalizeEngineError(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		want    Error // Status, Type, Code, Param, Message
		message string
		prefix  bool // message is only checked as a prefix
	}{
		{
			name:    "vllm current with integer code",
			status:  400,
			body:    `{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","param":null,"code":400}}`,
			want:    Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded"},
			message: "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
		},
		{
			name:    "vllm current plain bad request with param",
			status:  400,
			body:    `{"error":{"message":"temperature must be non-negative","type":"BadRequestError","param":"temperature","code":400}}`,
			want:    Error{Status: 400, Type: "invalid_request_error", Code: "invalid_request", Param: "temperature"},
			message: "temperature must be non-negative",
		},
		{
			name:    "vllm unknown model",
			status:  404,
			body:    `{"error":{"message":"The model ` + "`gpt-5`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`,
			want:    Error{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: "model"},
			message: "The model `gpt-5` does not exist.",
		},
		{
			name:    "vllm legacy flat",
			status:  500,
			body:    `{"object":"error","message":"engine dead","type":"InternalServerError","param":null,"code":500}`,
			want:    Error{Status: 500, Type: "server_error", Code: "engine_error"},
			message: "engine dead",
		},
		{
			name:    "vllm error inside a 200 stream",
			status:  200,
			body:    `{"error":{"message":"bad logits","type":"BadRequestError","param":null,"code":400}}`,
			want:    Error{Status: 400, Type: "invalid_request_error", Code: "invalid_request"},
			message: "bad logits",
		},
		{
			name:    "error inside a stream without a code",
			status:  0,
			body:    `{"error":{"message":"boom"}}`,
			want:    Error{Status: 500, Type: "server_error", Code: "engine_error"},
			message: "boom",
		},
		{
			name:    "vllm api key check",
			status:  401,
			body:    `{"error":"Unauthorized"}`,
			want:    Error{Status: 401, Type: "authentication_error", Code: "engine_unauthorized"},
			message: "Unauthorized",
		},
		{
			name:    "fastapi detail string",
			status:  404,
			body:    `{"detail":"Not Found"}`,
			want:    Error{Status: 404, Type: "invalid_request_error", Code: "not_found"},
			message: "Not Found",
		},
		{
			name:    "fastapi validation list",
			status:  422,
			body:    `{"detail":[{"type":"missing","loc":["body","messages",0,"role"],"msg":"Field required","input":{}},{"type":"string_type","loc":["body","model"],"msg":"Input should be a valid string","input":1}]}`,
			want:    Error{Status: 422, Type: "invalid_request_error", Code: "invalid_request", Param: "messages[0].role"},
			message: "messages[0].role: Field required; model: Input should be a valid string",
		},
		{
			name:    "tgi validation",
			status:  422,
			body:    `{"error":"Input validation error: ` + "`temperature`" + ` must be strictly positive","error_type":"validation"}`,
			want:    Error{Status: 422, Type: "invalid_request_error", Code: "invalid_request"},
			message: "Input validation error: `temperature` must be strictly positive",
		},
		{
			name:    "tgi generation failure comes as 424",
			status:  424,
			body:    `{"error":"Request failed during generation: Server error: CUDA out of memory","error_type":"generation"}`,
			want:    Error{Status: 424, Type: "server_error", Code: "engine_error"},
			message: "Request failed during generation: Server error: CUDA out of memory",
		},
		{
			name:    "tgi overloaded",
			status:  429,
			body:    `{"error":"Model is overloaded","error_type":"overloaded"}`,
			want:    Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded"},
			message: "Model is overloaded",
		},
		{
			name:    "llama.cpp context size",
			status:  400,
			body:    `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`,
			want:    Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded"},
			message: "the request exceeds the available context size, try increasing it",
		},
		{
			name:    "llama.cpp server error keeps its OpenAI type",
			status:  500,
			body:    `{"error":{"code":500,"message":"Failed to parse tools","type":"server_error"}}`,
			want:    Error{Status: 500, Type: "server_error", Code: "engine_error"},
			message: "Failed to parse tools",
		},
		{
			name:    "llama.cpp loading model",
			status:  503,
			body:    `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			want:    Error{Status: 503, Type: "server_error", Code: "engine_overloaded"},
			message: "Loading model",
		},
		{
			name:    "openai proper keeps string code",
			status:  429,
			body:    `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			want:    Error{Status: 429, Type: "rate_limit_error", Code: "insufficient_quota"},
			message: "You exceeded your current quota",
		},
		{
			name:    "openai proper invalid request",
			status:  400,
			body:    `{"error":{"message":"Invalid 'n'","type":"invalid_request_error","param":"n","code":"invalid_value"}}`,
			want:    Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "n"},
			message: "Invalid 'n'",
		},
		{
			name:    "sglang abort",
			status:  400,
			body:    `{"object":"error","message":"Request aborted","type":"BadRequestError","param":null,"code":400}`,
			want:    Error{Status: 400, Type: "invalid_request_error", Code: "invalid_request"},
			message: "Request aborted",
		},
		{
			name:    "non-json error page",
			status:  502,
			body:    "\n<html><head><title>502 Bad Gateway</title></head></html>\n",
			want:    Error{Status: 502, Type: "server_error", Code: "engine_error"},
			message: "<html><head><title>502 Bad Gateway</title></head></html>",
		},
		{
			name:    "plain text 503",
			status:  503,
			body:    "upstream connect error or disconnect/reset before headers",
			want:    Error{Status: 503, Type: "server_error", Code: "engine_overloaded"},
			message: "upstream connect error or disconnect/reset before headers",
		},
		{
			name:    "empty body",
			status:  503,
			body:    "",
			want:    Error{Status: 503, Type: "server_error", Code: "engine_overloaded"},
			message: "engine returned 503 Service Unavailable",
		},
		{
			name:    "empty body unknown status",
			status:  599,
			body:    "  \n",
			want:    Error{Status: 599, Type: "server_error", Code: "engine_error"},
			message: "engine returned status 599",
		},
		{
			name:    "json string body",
			status:  500,
			body:    `"Internal Server Error"`,
			want:    Error{Status: 500, Type: "server_error", Code: "engine_error"},
			message: "Internal Server Error",
		},
		{
			name:    "unknown json object",
			status:  500,
			body:    `{"status":"failed","reason":42}`,
			want:    Error{Status: 500, Type: "server_error", Code: "engine_error"},
			message: `{"status":"failed","reason":42}`,
		},
		{
			name:    "top-level message",
			status:  400,
			body:    `{"message":"bad things","code":"E42"}`,
			want:    Error{Status: 400, Type: "invalid_request_error", Code: "E42"},
			message: "bad things",
		},
		{
			name:    "error null falls through",
			status:  500,
			body:    `{"error":null,"detail":"oops"}`,
			want:    Error{Status: 500, Type: "server_error", Code: "engine_error"},
			message: "oops",
		},
		{
			name:    "empty message uses status",
			status:  429,
			body:    `{"error":{"message":"","code":429}}`,
			want:    Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded"},
			message: "engine returned 429 Too Many Requests",
		},
		{
			name:    "other 4xx",
			status:  413,
			body:    `{"detail":"Request Entity Too Large"}`,
			want:    Error{Status: 413, Type: "invalid_request_error", Code: "request_too_large"},
			message: "Request Entity Too Large",
		},
		{
			name:    "403",
			status:  403,
			body:    `forbidden`,
			want:    Error{Status: 403, Type: "permission_error", Code: "engine_forbidden"},
			message: "forbidden",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NormalizeEngineError(tc.status, []byte(tc.body))
			if got.Status != tc.want.Status || got.Type != tc.want.Type || got.Code != tc.want.Code || got.Param != tc.want.Param {
				t.Errorf("got status=%d type=%q code=%q param=%q\nwant status=%d type=%q code=%q param=%q",
					got.Status, got.Type, got.Code, got.Param, tc.want.Status, tc.want.Type, tc.want.Code, tc.want.Param)
			}
			if got.Message != tc.message {
				t.Errorf("message %q\n   want %q", got.Message, tc.message)
			}
			if got.RequestID != "" || got.PartialOutput != nil || got.Retryable != nil || got.DeliveredOutputTokens != nil {
				t.Errorf("extension fields set: %+v", got)
			}
		})
	}
}

func TestNormalizeEngineErrorExcerpt(t *testing.T) {
	page := "<html>" + strings.Repeat("é", 400) + "</html>" // 800+ bytes of two-byte characters
	got := NormalizeEngineError(502, []byte(page))
	if len(got.Message) > maxExcerpt {
		t.Fatalf("message is %d bytes, want at most %d", len(got.Message), maxExcerpt)
	}
	if !strings.HasPrefix(got.Message, "<html>éé") || !strings.HasSuffix(got.Message, "…") {
		t.Fatalf("message %q", got.Message)
	}
	if !utf8.ValidString(got.Message) {
		t.Fatal("excerpt cut a character in two")
	}
	invalid := NormalizeEngineError(500, []byte(strings.Repeat("\xff", 600)))
	if len(invalid.Message) > maxExcerpt || !utf8.ValidString(invalid.Message) {
		t.Fatalf("invalid UTF-8 body gave %d bytes, valid=%v", len(invalid.Message), utf8.ValidString(invalid.Message))
	}
}
