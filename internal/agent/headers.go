package agent

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/internal/upstream"
)

// hopHeaders belong to one connection and are never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// copyRequestHeaders copies a data request's headers to the engine request:
// everything except hop-by-hop headers, the lease headers (the engine knows
// nothing of leases; the attempt id is kept so engine logs can name it), the
// framing the request writer sets itself, and Accept-Encoding (the agent must
// read the stream's events, so it asks for it uncompressed).
func copyRequestHeaders(dst, src http.Header) {
	for k, vs := range src {
		if strings.HasPrefix(k, "X-Fencegate-") && k != HeaderAttempt {
			continue
		}
		switch k {
		case "Host", "Content-Length", "Accept-Encoding", "Expect":
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
	removeHopHeaders(dst, src)
}

// copyEngineHeaders copies the engine's response header fields, in the order received,
// without hop-by-hop headers and Content-Length (the agent sets its own framing). It
// reads the engine client's fields as they are rather than an http.Header built of them:
// a field replaces what dst held under its name, and later fields of the same name join
// it.
func copyEngineHeaders(dst http.Header, src upstream.Header) {
	var seen [16]string // the names copied so far; engines send a handful
	names := seen[:0]
	var connection []string
	for _, f := range src {
		k := textproto.CanonicalMIMEHeaderKey(f.Name)
		switch k {
		case "Content-Length":
			continue
		case "Connection":
			connection = append(connection, f.Value)
		}
		if slices.Contains(names, k) {
			dst[k] = append(dst[k], f.Value)
			continue
		}
		names = append(names, k)
		dst[k] = []string{f.Value}
	}
	removeHop(dst, connection)
}

// removeHopHeaders deletes the hop-by-hop headers from dst, including those
// that src's Connection header names.
func removeHopHeaders(dst, src http.Header) { removeHop(dst, src.Values("Connection")) }

// removeHop deletes the hop-by-hop headers from dst, including those that connection (the
// values of a Connection header) names.
func removeHop(dst http.Header, connection []string) {
	for _, v := range connection {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				dst.Del(textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}
