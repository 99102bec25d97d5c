// Package console renders the operator's console the gateway serves under /ui/: the pools
// and their replicas, the recent requests that did not complete plainly, and one request's
// record drawn as a timeline (docs/operations.md, "The console"; the trace document is
// docs/design.md §7, Traces).
//
// The package is pure: it turns what the gateway already knows (its pools, the journal's
// records, a trace document) into views and renders them with html/template; no network,
// no store access, no clock (times are passed in). Pages are plain HTML with an embedded
// style sheet and no script, so they read the same in a browser, a screen reader and curl.
package console
