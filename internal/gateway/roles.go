package gateway

import (
	"context"
	"net/http"
	"strings"

	"github.com/fencegate/fencegate/internal/openai"
)

// Who may call what (docs/design.md §2): tenant keys reach the API (/v1/*) only; the
// operator's calls need an admin key, except on an admin listener bound to loopback, which
// only this host reaches. A client's address on a shared listener proves nothing — behind a
// sidecar proxy or a TLS terminator on the same host every client is loopback — so no rule
// here looks at it.

// access is what a route asks of its caller.
type access uint8

const (
	// accessOpen: anyone (/healthz).
	accessOpen access = iota
	// accessAPI: a tenant or admin key once the gateway has keys (/v1/*).
	accessAPI
	// accessProbe: anyone; what is ready, and the replicas' detail only to an admin
	// (/readyz).
	accessProbe
	// accessMetrics: an admin, or anyone when metrics.public is set or on the admin
	// listener (/metrics).
	accessMetrics
	// accessAdmin: an admin (/admin/*, pprof).
	accessAdmin
	// accessConsole: an admin, as accessAdmin, whose browser may also send the key as the
	// password of HTTP Basic authentication, and is asked for it (the console, /ui/).
	accessConsole
)

// listener is which of the gateway's listeners serves a handler.
type listener uint8

const (
	// listenerShared is the one listener when admin_listen is unset: API and operations.
	listenerShared listener = iota
	// listenerAPI is the public listener beside an admin listener: the API and /healthz.
	listenerAPI
	// listenerAdmin is admin_listen's.
	listenerAdmin
)

// caller is who sent a request, as its key says.
type caller struct {
	key apiKey
	// presented: the request carried a key; known: that key is valid.
	presented, known bool
}

func (c caller) admin() bool { return c.known && c.key.Admin }

// bearerKey returns the key a request carries: 'Authorization: Bearer', or x-api-key as the
// Anthropic SDKs send it.
func bearerKey(r *http.Request) (string, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(tok), true
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return strings.TrimSpace(k), true
	}
	return "", false
}

// identify finds the key a request carries among the configuration's and the store's.
func (s *Server) identify(r *http.Request, l *live) caller {
	tok, ok := bearerKey(r)
	if !ok {
		return caller{}
	}
	digest := keyDigest(tok)
	k, found := l.keys[digest]
	if !found && l.cfg.Auth.UsesStoreKeys() {
		k, found = s.lookupStoreKey(r.Context(), digest)
	}
	return caller{key: k, presented: true, known: found}
}

// hasAdminKey reports whether an admin key exists, in the configuration or in the store.
func (s *Server) hasAdminKey(l *live) bool {
	if len(l.cfg.Auth.AdminKeys) > 0 {
		return true
	}
	if !l.cfg.Auth.UsesStoreKeys() {
		return false
	}
	s.storeKeys.mu.Lock()
	defer s.storeKeys.mu.Unlock()
	return s.storeKeys.anyAdmin
}

// detailKey marks a request whose caller may see the replicas' detail (/readyz).
type detailKey struct{}

func withDetail(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), detailKey{}, true))
}

func maySeeDetail(r *http.Request) bool {
	v, _ := r.Context().Value(detailKey{}).(bool)
	return v
}

// guard wraps h with what a route asks of its caller on listener on.
func (s *Server) guard(a access, on listener, h http.HandlerFunc) http.HandlerFunc {
	switch a {
	case accessOpen:
		return h
	case accessAPI:
		return s.auth(h)
	case accessProbe:
		return func(w http.ResponseWriter, r *http.Request) {
			// A probe sends no key; a key that is not an admin's is not refused here, it
			// just sees what anyone sees.
			if on == listenerAdmin || s.identify(r, s.current()).admin() {
				r = withDetail(r)
			}
			h(w, r)
		}
	case accessMetrics:
		if on == listenerAdmin {
			return h
		}
		return func(w http.ResponseWriter, r *http.Request) {
			if s.current().cfg.Metrics.Public {
				h(w, r)
				return
			}
			s.requireAdmin(w, r, h, "set metrics.public: true for scrapers that cannot send a header, or serve /metrics on admin_listen")
		}
	}
	if on == listenerAdmin && s.adminLoopback {
		return h
	}
	if a == accessConsole {
		return func(w http.ResponseWriter, r *http.Request) {
			s.requireAdmin(askBasic{w}, withBasicAsBearer(r), h, "")
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s.requireAdmin(w, r, h, "")
	}
}

// withBasicAsBearer returns r with the password of its HTTP Basic credentials as its
// bearer key: a browser cannot send 'Authorization: Bearer' when it opens a page, but it
// asks its user for Basic credentials and sends them with every page after (the console's
// user name is not read). r is returned as is without Basic credentials.
func withBasicAsBearer(r *http.Request) *http.Request {
	_, pass, ok := r.BasicAuth()
	if !ok {
		return r
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+pass)
	return r
}

// askBasic asks a browser for Basic credentials with a 401: the console's answer without
// a valid key is otherwise the API's (401 invalid_api_key).
type askBasic struct{ http.ResponseWriter }

func (a askBasic) WriteHeader(status int) {
	if status == http.StatusUnauthorized {
		a.Header().Set("WWW-Authenticate", `Basic realm="fencegate console", charset="UTF-8"`)
	}
	a.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection (write deadlines).
func (a askBasic) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// requireAdmin runs h for an admin's request and answers anyone else: 401 without a valid
// key, 403 admin_only to a tenant key, and 403 admin_disabled when no admin key exists on
// a shared listener, with how to enable the calls (and alt, another way for this route).
func (s *Server) requireAdmin(w http.ResponseWriter, r *http.Request, h http.HandlerFunc, alt string) {
	l := s.current()
	c := s.identify(r, l)
	switch {
	case c.admin():
		h(w, r.WithContext(context.WithValue(r.Context(), identityKey, c.key)))
		return
	case !c.known && !s.storeKeysKnown(r.Context(), l):
		// The key may be a stored admin key, which cannot be read now.
		s.writeKeysUnavailable(w, r)
	case c.known:
		s.log.Warn("a tenant key was refused on an admin path", "key_id", c.key.ID, "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(r))
		writeError(w, r, &openai.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_only",
			Message: "this endpoint needs an admin key; tenant keys reach /v1/* only", RequestID: requestID(r)})
	case !s.hasAdminKey(l):
		msg := "admin calls are off on this listener: no admin key is configured. Add one under auth.admin_keys (or with `fencegate keys create --admin`) and send it as 'Authorization: Bearer <key>', or serve them on a loopback admin_listen"
		if alt != "" {
			msg += "; or " + alt
		}
		writeError(w, r, &openai.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_disabled",
			Message: msg, RequestID: requestID(r)})
	default:
		writeError(w, r, &openai.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "this endpoint needs an admin key: send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>')", RequestID: requestID(r)})
	}
}
