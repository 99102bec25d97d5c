// Package bench is `fencegate bench`, a load generator for any OpenAI-compatible
// streaming endpoint: an engine, the gateway, or anything else that speaks chat or text
// completions, the Anthropic Messages API or the OpenAI Responses API.
//
// It keeps a fixed number of streams open for a duration or a request count and
// reports what a client sees: time to first token, the gaps between tokens (exact
// percentiles over every sample), requests and output tokens per second, and errors by
// HTTP status and error code, an interrupted stream included. Given a process id it also
// reports that process's CPU time per request and peak RSS, so the cost of a proxy can
// be measured next to its latency. With several targets it runs them in alternating
// rounds and reports medians and ratios to the first, which is what makes numbers from a
// noisy machine comparable.
//
// Events are split and classified by internal/sse, the same scanner the gateway uses, so
// the first token is the delivery boundary as the gateway defines it for each API. The
// client must not be what limits the measurement: each stream reuses its read buffer
// and decoder, and nothing is allocated per event beyond the decoder's own buffer.
package bench
