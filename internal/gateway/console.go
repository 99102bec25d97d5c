package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"mime"
	"net/http"
	"slices"

	"github.com/fencegate/fencegate/internal/console"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/trace"
)

// The console (docs/operations.md, The console): HTML pages under /ui/ for an operator's
// browser, drawn from what /readyz, the journal and the trace endpoint already hold. They
// are operator routes (routes_table.go): on the admin listener, and on a shared listener
// to admin keys only (accessConsole, roles.go).

// consoleHeaders are set on every console page: nothing is cached (the pages name keys and
// show what clients received), and the page may load nothing — it has no script, and its
// style sheet is inline.
func consoleHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

// writePage renders a page into a buffer first, so a template error becomes a 500 rather
// than half a page.
func (s *Server) writePage(w http.ResponseWriter, r *http.Request, status int, render func(*bytes.Buffer) error) {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		s.log.Error("console page not rendered", "path", r.URL.Path, "request_id", requestID(r), "err", err)
		b.Reset()
		status = http.StatusInternalServerError
		console.RenderError(&b, console.ErrorPage{Title: "Page not rendered", Code: "internal_error", Message: "the page could not be rendered; the gateway's log says why"})
	}
	consoleHeaders(w)
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (s *Server) writeConsoleError(w http.ResponseWriter, r *http.Request, status int, e console.ErrorPage) {
	s.writePage(w, r, status, func(b *bytes.Buffer) error { return console.RenderError(b, e) })
}

// handleConsoleOverview shows the pools and their replicas: /readyz's detail.
//
//	GET /ui/
func (s *Server) handleConsoleOverview(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	l := s.current()
	st := s.conn.State()
	o := console.Overview{Now: now, Draining: s.isDraining(),
		Store: console.StoreState{Connected: st.Connected, LastError: st.LastError, Since: st.Since}}
	for _, n := range l.models {
		list, avail := l.pools[n].status(now)
		p := console.Pool{Model: n, Available: avail}
		for _, rs := range list {
			p.Replicas = append(p.Replicas, consoleReplica(rs))
		}
		o.Pools = append(o.Pools, p)
	}
	s.writePage(w, r, http.StatusOK, func(b *bytes.Buffer) error { return console.RenderOverview(b, o) })
}

func consoleReplica(rs replicaStatus) console.Replica {
	c := console.Replica{Name: rs.Name, URL: rs.URL, Priority: rs.Priority, State: rs.State, Reason: rs.Reason,
		Outstanding: rs.Outstanding, Peak: rs.Peak, Running: rs.Running, Waiting: rs.Waiting, KVUsage: rs.KVUsage,
		EngineVersion: rs.EngineVersion, ConsecutiveFailures: rs.ConsecutiveFailures}
	for _, k := range slices.Sorted(maps.Keys(rs.Fingerprint)) {
		c.Fingerprint = append(c.Fingerprint, console.KeyValue{Key: k, Value: rs.Fingerprint[k]})
	}
	if rs.Canary != nil {
		c.Canary, c.CanaryDetail = rs.Canary.State, rs.Canary.Detail
	}
	if rs.EjectedUntil != nil {
		c.EjectedUntil = *rs.EjectedUntil
	}
	return c
}

// handleConsoleRequests lists the recent requests that did not complete plainly, filtered
// by model, key id, outcome and time (console.ParseFilter). A filter it cannot apply is
// answered 400 with the form and why.
//
//	GET /ui/requests?model=&key=&outcome=&since=&until=&limit=
func (s *Server) handleConsoleRequests(w http.ResponseWriter, r *http.Request) {
	models := s.current().models
	f, q, err := console.ParseFilter(r.URL.Query(), s.now())
	var fe *console.FilterError
	if errors.As(err, &fe) {
		l := console.NewRequestList(f, models, nil)
		l.Error = fe
		s.writePage(w, r, http.StatusBadRequest, func(b *bytes.Buffer) error { return console.RenderRequests(b, l) })
		return
	}
	// The requests this gateway has just ended may still be in its journal's batch.
	err = s.journal.Flush(r.Context())
	var rows []*store.Request
	if err == nil {
		rows, err = s.store.Recent(r.Context(), q)
	}
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.writeConsoleError(w, r, http.StatusServiceUnavailable, console.ErrorPage{Title: "The request journal is unavailable",
			Code: "journal_unavailable", Message: err.Error()})
		return
	}
	l := console.NewRequestList(f, models, rows)
	s.writePage(w, r, http.StatusOK, func(b *bytes.Buffer) error { return console.RenderRequests(b, l) })
}

// handleConsoleRequest draws one request's record as a timeline, with what its client
// received from its trace when it kept one. With ?wait=DURATION (at most 30s) a request
// still running is waited for first, as on the trace endpoint.
//
//	GET /ui/requests/{id}
func (s *Server) handleConsoleRequest(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, ok := s.waitParam(w, r, maxTraceWait)
	if !ok {
		return
	}
	rec, doc, err := s.requestTrace(r.Context(), id, wait)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.writeConsoleError(w, r, http.StatusNotFound, console.ErrorPage{Title: "No such request", Code: "request_not_found",
			Message: "no request with id " + id + " is known (or it was swept after idempotency.retention)"})
		return
	case err != nil:
		if r.Context().Err() != nil {
			return
		}
		s.writeConsoleError(w, r, http.StatusServiceUnavailable, console.ErrorPage{Title: "The request journal is unavailable",
			Code: "journal_unavailable", Message: err.Error()})
		return
	}
	var d *trace.Document
	if doc != nil {
		d = new(trace.Document)
		if err := json.Unmarshal(doc, d); err != nil {
			// The record is still worth drawing; the page says it kept no trace.
			s.log.Warn("trace document not readable", "request_id", id, "err", err)
			d = nil
		}
	}
	tl := console.NewTimeline(rec, d, s.now())
	s.writePage(w, r, http.StatusOK, func(b *bytes.Buffer) error { return console.RenderRequest(b, tl) })
}

// handleConsoleTrace is the trace endpoint's document as a file to save, for
// `fencegate replay`: a browser cannot send the admin key the trace endpoint asks for on
// a shared listener, but it can send the console's credentials.
//
//	GET /ui/requests/{id}/trace
func (s *Server) handleConsoleTrace(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": r.PathValue("id") + ".trace.json"}))
	w.Header().Set("Cache-Control", "no-store")
	s.handleRequestTrace(w, r)
}
