package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/sse"
)

// API is the request shape sent and the event stream expected back.
type API int

const (
	Chat        API = iota // POST /v1/chat/completions
	Completions            // POST /v1/completions
	Messages               // POST /v1/messages (Anthropic)
	Responses              // POST /v1/responses
)

var apiNames = [...]string{"chat", "completions", "messages", "responses"}

func (a API) String() string {
	if a >= 0 && int(a) < len(apiNames) {
		return apiNames[a]
	}
	return fmt.Sprintf("API(%d)", int(a))
}

// ParseAPI is the inverse of API.String.
func ParseAPI(s string) (API, error) {
	for i, name := range apiNames {
		if s == name {
			return API(i), nil
		}
	}
	return 0, fmt.Errorf("bench: --api %q is none of %s", s, strings.Join(apiNames[:], ", "))
}

// path is the API's route under /v1.
func (a API) path() string {
	switch a {
	case Completions:
		return "/completions"
	case Messages:
		return "/messages"
	case Responses:
		return "/responses"
	}
	return "/chat/completions"
}

// protocol is how the sse package classifies the API's events, which decides what the
// first token is.
func (a API) protocol() sse.Protocol {
	switch a {
	case Messages:
		return sse.Messages
	case Responses:
		return sse.Responses
	}
	return sse.Completions
}

// Options is one benchmark: the load, and the targets it is applied to.
type Options struct {
	// ReferenceProxy, when set, is the address to serve the reference proxy on in front
	// of URL instead of sending load (ServeReferenceProxy).
	ReferenceProxy string
	// FloorProxy, when set, is the address to serve the floor proxy on in front of URL
	// instead of sending load (ServeFloorProxy).
	FloorProxy  string
	URL         string        // the baseline target's base URL
	API         API           // request shape
	Model       string        // model name in every request
	Prompt      string        // the user message (chat, messages), prompt or input
	PromptBytes int           // with a conversation before Prompt, the body's size (0: none)
	MaxTokens   int           // output tokens asked for
	Concurrency int           // streams open at once
	Duration    time.Duration // no request starts after this long; 0 with Requests set: no limit
	Requests    int           // measured requests per run; 0: run for Duration
	Warmup      int           // unmeasured requests before each run
	Header      http.Header   // added to every request; overrides the defaults
	Timeout     time.Duration // per request; 0: none
	IgnoreEOS   bool          // send ignore_eos on chat and completions
	StreamUsage bool          // send stream_options.include_usage on chat and completions
	PID         int           // the baseline's server process, 0: none
	ResetPeak   bool          // reset each PID's peak RSS before a run

	// Workload is "streams" (the default: the same request over and over) or
	// "multiturn" (conversations, Multi).
	Workload string
	Multi    Multiturn

	Compare     []string // further targets, compared with URL
	ComparePIDs []int    // their processes, in order; empty or one per target
	Rounds      int      // rounds; 0: defaultCompareRounds with Compare, else 1
}

// check validates o and fills in its defaults.
func (o *Options) check() error {
	switch {
	case o.Concurrency < 1:
		return fmt.Errorf("bench: --concurrency must be at least 1, got %d", o.Concurrency)
	case o.MaxTokens < 1:
		return fmt.Errorf("bench: --max-tokens must be at least 1, got %d", o.MaxTokens)
	case o.Requests < 0, o.Warmup < 0, o.Duration < 0, o.Timeout < 0, o.Rounds < 0:
		return fmt.Errorf("bench: --requests, --warmup, --duration, --timeout and --rounds must not be negative")
	case o.PID < 0:
		return fmt.Errorf("bench: --pid must not be negative")
	case len(o.ComparePIDs) > 0 && len(o.ComparePIDs) != len(o.Compare):
		return fmt.Errorf("bench: %d --compare-pid values for %d --compare targets: give one per target (0 for none)", len(o.ComparePIDs), len(o.Compare))
	case o.API < Chat || o.API > Responses:
		return fmt.Errorf("bench: unknown API %d", int(o.API))
	}
	if o.Requests == 0 && o.Duration == 0 {
		o.Duration = defaultDuration
	}
	if o.Rounds == 0 {
		o.Rounds = 1
		if len(o.Compare) > 0 {
			o.Rounds = defaultCompareRounds
		}
	}
	for _, u := range append([]string{o.URL}, o.Compare...) {
		if _, err := endpoint(u, o.API); err != nil {
			return err
		}
	}
	return nil
}

// endpoint is the URL requests go to: base with the API's path. A base that already
// ends in /v1 (as SDK base URLs do) gets only the route.
func endpoint(base string, api API) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("bench: target %q is not an http:// or https:// URL", base)
	}
	b := strings.TrimRight(base, "/")
	if !strings.HasSuffix(b, "/v1") {
		b += "/v1"
	}
	return b + api.path(), nil
}

// Body is the JSON of every request of a run. It is encoded once: all requests of a run
// are the same, so that two targets get exactly the same load. With PromptBytes, a
// conversation comes before the prompt (history), and the body is about PromptBytes
// long, never longer.
func (o *Options) Body() []byte {
	b := o.body("", nil, "")
	if o.PromptBytes <= len(b) {
		return b
	}
	budget := o.PromptBytes - len(b) - 1 // the comma after the conversation
	if o.API == Completions {
		long := longPrompt(budget)
		for len(long) > 0 {
			if b := o.body(long, nil, ""); len(b) <= o.PromptBytes {
				return b
			}
			long = long[:len(long)*15/16]
		}
		return b
	}
	system, items := history(o.API, budget)
	return o.body("", items, system)
}

// body encodes a request: the prompt after the conversation's text (completions), or
// after its turns, with its system prompt (Messages).
func (o *Options) body(long string, turns []json.RawMessage, system string) []byte {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	last := mustJSON(message{Role: "user", Content: o.Prompt})
	messages := append(turns[:len(turns):len(turns)], last)
	var v any
	switch o.API {
	case Chat, Completions:
		req := struct {
			Model         string            `json:"model"`
			Messages      []json.RawMessage `json:"messages,omitempty"`
			Prompt        string            `json:"prompt,omitempty"`
			MaxTokens     int               `json:"max_tokens"`
			Stream        bool              `json:"stream"`
			StreamOptions *streamOptions    `json:"stream_options,omitempty"`
			IgnoreEOS     bool              `json:"ignore_eos,omitempty"`
		}{Model: o.Model, MaxTokens: o.MaxTokens, Stream: true, IgnoreEOS: o.IgnoreEOS}
		if o.API == Chat {
			req.Messages = messages
		} else {
			req.Prompt = long + o.Prompt
		}
		if o.StreamUsage {
			req.StreamOptions = &streamOptions{IncludeUsage: true}
		}
		v = req
	case Messages:
		// The Messages request has no ignore_eos: an engine may end an answer before
		// max_tokens, which the token count then shows.
		v = struct {
			Model     string            `json:"model"`
			MaxTokens int               `json:"max_tokens"`
			System    string            `json:"system,omitempty"`
			Messages  []json.RawMessage `json:"messages"`
			Stream    bool              `json:"stream"`
		}{o.Model, o.MaxTokens, system, messages, true}
	case Responses:
		// store:false so that a load test does not fill a server's response store.
		var input any = o.Prompt
		if len(turns) > 0 {
			input = messages
		}
		v = struct {
			Model           string `json:"model"`
			Input           any    `json:"input"`
			MaxOutputTokens int    `json:"max_output_tokens"`
			Stream          bool   `json:"stream"`
			Store           bool   `json:"store"`
		}{o.Model, input, o.MaxTokens, true, false}
	}
	return mustJSON(v)
}

// header is the header of every request of a run: what the API needs, then the
// user's --header values, which win.
func (o *Options) header() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if o.API == Messages {
		h.Set("Anthropic-Version", "2023-06-01") // required by Anthropic's own API, ignored by engines
	}
	for k, vs := range o.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	return h
}
