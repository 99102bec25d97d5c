// Package protocol owns what differs between the APIs the gateway speaks — OpenAI chat and
// text completions, the Anthropic Messages API and the OpenAI Responses API — once the
// failover machine has decided: the shape of an error answered before any output, the
// final event that ends an interrupted stream so that the API's official SDKs raise it, and
// the event that ends a stream the engine left without its end. What counts as output is
// decided by package sse's summaries (sse.Protocol); the machine itself is the same for
// all of them (docs/design.md §2).
//
// It is a pure core package: no network, no files, no clocks, no goroutines.
package protocol
