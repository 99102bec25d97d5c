// Package kvevents reads vLLM's and SGLang's KV cache events and keeps, per replica, what they say of
// its prefix cache: how many blocks it holds, whether the stream of events is whole, and
// how many bytes of the gateway's prompt record a token of the engine's cache stands for.
// It is pure: no network, no goroutines, time passed in. The subscription (ZMQ) is the
// gateway's shell. docs/design.md, "Placement", says what the precise mode trusts and how
// it degrades.
package kvevents
