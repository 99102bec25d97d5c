package gateway

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/openai"
)

// apiKey is the identity behind a bearer key. The journal records ID, never the key.
type apiKey struct {
	ID    string
	Admin bool
}

func buildKeys(a config.Auth) map[string]apiKey {
	keys := make(map[string]apiKey)
	for _, k := range a.Keys {
		keys[keyDigest(k.Key)] = apiKey{ID: k.ID}
	}
	for _, k := range a.AdminKeys {
		keys[keyDigest(k.Key)] = apiKey{ID: k.ID, Admin: true}
	}
	return keys
}

// keyDigest hashes a key so that lookups do not compare secrets byte by byte.
func keyDigest(k string) string {
	sum := sha256.Sum256([]byte(k))
	return string(sum[:])
}

// auth requires a known bearer key when keys are configured.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		keys := s.current().keys
		if len(keys) == 0 {
			h(w, r)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			// The Anthropic SDKs send their key as x-api-key.
			tok, ok = r.Header.Get("X-Api-Key"), r.Header.Get("X-Api-Key") != ""
		}
		id, found := keys[keyDigest(strings.TrimSpace(tok))]
		if !ok || !found {
			writeError(w, r, &openai.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "missing or invalid API key: send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>')", RequestID: requestID(r)})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), identityKey, id)))
	}
}

func identity(r *http.Request) (apiKey, bool) {
	id, ok := r.Context().Value(identityKey).(apiKey)
	return id, ok
}
