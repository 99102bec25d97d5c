// Package llamatest runs llama.cpp's llama-server in tests: it writes a tiny
// llama-architecture model as a GGUF file (Model), whose answers are plain words and
// always exactly max_tokens long, and starts llama-server processes on loopback in front
// of it (Start), found through FENCEGATE_LLAMA_SERVER. It is imported by tests only.
package llamatest
