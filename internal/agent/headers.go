package agent

import (
	"net/http"
	"net/textproto"
	"strings"
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

// copyResponseHeaders copies the engine's response headers, without
// hop-by-hop headers and Content-Length (the agent sets its own framing).
func copyResponseHeaders(dst, src http.Header) {
	for k, vs := range src {
		if k == "Content-Length" {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
	removeHopHeaders(dst, src)
}

// removeHopHeaders deletes the hop-by-hop headers from dst, including those
// that src's Connection header names.
func removeHopHeaders(dst, src http.Header) {
	for _, v := range src.Values("Connection") {
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
