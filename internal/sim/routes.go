package sim

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
)

// routes builds the replica's HTTP surface: vLLM's API server endpoints
// plus the /sim control endpoints. Like vLLM's build_app, it registers the
// generation endpoints only for a model that generates and the embeddings
// endpoint only for one that embeds; the others fall to the 404.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	switch s.cfg.Task {
	case TaskGenerate:
		mux.Handle("POST /v1/chat/completions", s.serveGeneration(endpointChat))
		mux.Handle("POST /v1/completions", s.serveGeneration(endpointCompletions))
		mux.Handle("POST /v1/messages", s.serveGeneration(endpointMessages))
		mux.HandleFunc("POST /v1/messages/count_tokens", s.serveCountTokens)
		mux.Handle("POST /v1/responses", s.serveGeneration(endpointResponses))
		mux.HandleFunc("GET /v1/responses/{id}", s.serveGetResponse)
		mux.HandleFunc("POST /v1/responses/{id}/cancel", s.serveCancelResponse)
	case TaskEmbed:
		mux.Handle("POST /v1/embeddings", s.serveGeneration(endpointEmbeddings))
	}
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version}) // vLLM's show_version
	})
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {}) // 200, empty body, as vLLM
	mux.HandleFunc("POST /tokenize", s.serveTokenize)
	mux.Handle("GET /metrics", s.metrics.handler())
	if s.cfg.ServerDevMode {
		mux.HandleFunc("POST /reset_prefix_cache", s.serveResetPrefixCache)
	}
	mux.HandleFunc("POST /sim/faults", s.serveArmFault)
	mux.HandleFunc("GET /sim/requests", s.serveRecords)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"}) // FastAPI's 404
	})
	return s.tracked(s.authenticated(mux))
}

// authenticated is vLLM's AuthenticationMiddleware with --api-key: requests whose path
// starts with /v1 (OPTIONS excepted) need the key as a bearer token.
func (s *Server) authenticated(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	want := "Bearer " + s.cfg.APIKey
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions && strings.HasPrefix(r.URL.Path, "/v1") &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads a request body, bounded by maxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
}

// writeJSON sends v as a JSON response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the reply: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that left cannot be told anything
}

// modelCard is vLLM's /v1/models entry (ModelCard): root is where the weights came
// from, the --model argument.
type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen int               `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	created := s.started.Unix()
	card := modelCard{
		ID: s.cfg.Model, Object: "model", Created: created, OwnedBy: "vllm",
		Root: s.cfg.ModelPath, MaxModelLen: s.cfg.MaxModelLen,
		Permission: []modelPermission{{
			ID:      fmt.Sprintf("modelperm-%016x", rand.Uint64()),
			Object:  "model_permission",
			Created: created, AllowSampling: true, AllowLogprobs: true, AllowView: true,
			Organization: "*",
		}},
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelCard{card}})
}

// tokenizeRequest is vLLM's /tokenize body: a prompt, or chat messages that
// are rendered with the chat template first.
type tokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               *string         `json:"prompt"`
	Messages             []chatMessageIn `json:"messages"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
}

func (s *Server) serveTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.writeError(w, apiError{status: http.StatusBadRequest, message: "JSON decode error: " + err.Error()})
		return
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		s.writeError(w, apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", req.Model), param: "model"})
		return
	}
	var text string
	switch {
	case req.Prompt != nil:
		text = *req.Prompt
	case req.Messages != nil:
		chat := completionRequest{Messages: req.Messages, AddGenerationPrompt: req.AddGenerationPrompt, ContinueFinalMessage: req.ContinueFinalMessage}
		if chat.ContinueFinalMessage && chat.AddGenerationPrompt != nil && *chat.AddGenerationPrompt {
			var v validationErrors
			v.valueError(bytes.TrimSpace(body), cannotSetBoth, "body")
			s.writeError(w, *v.err())
			return
		}
		prompt, _, invalid := chatPrompt(&chat)
		if invalid != nil {
			s.writeError(w, *invalid)
			return
		}
		text = prompt
	default:
		s.writeError(w, apiError{status: http.StatusBadRequest, message: "Field required: prompt or messages", param: "prompt"})
		return
	}
	ids := tokenIDs(text)
	tokens := make([]int, len(ids))
	for i, id := range ids {
		tokens[i] = int(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"count":         len(tokens),
		"max_model_len": s.cfg.MaxModelLen,
		"tokens":        tokens,
		"token_strs":    nil,
	})
}
