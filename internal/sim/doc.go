// Package sim is a simulated OpenAI-compatible inference engine that speaks
// vLLM's wire format: chat and text completions (stream and non-stream, n
// choices, prompt arrays, forced tool calls), the Anthropic Messages API and
// the OpenAI Responses API as vLLM converts them from chat, embeddings for a
// replica started as an embedding model, /v1/models, /health, /tokenize
// and vLLM-named Prometheus metrics, engine-run tools called on real MCP
// servers as vLLM's --tool-server calls them, with a FIFO admission queue, a
// chained-hash prefix cache and deterministic output text. It owns fault injection at every point of the token cycle (accept,
// prefill, token computed, token sent): crashes, resets, hangs, errors in
// vLLM's shape, malformed or oversized events and dropped connections (see
// the fault grammar in fault.go), and a record of every request, so a
// test can state a fault next to its assertion and then check what the
// replica saw. It is the replica of every test and of the demo, used both
// in-process (Start) and as a process (Main). It must never import any other
// fencegate package: it stands in for a real engine, so it may know nothing
// of the gateway, the failover core or their types.
package sim
