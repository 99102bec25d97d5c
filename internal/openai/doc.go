// Package openai owns the OpenAI wire format as fencegate speaks it: parsing
// and validating client requests (keeping the body for the engine untouched),
// the error object with fencegate's extension fields and its hand-written JSON
// encoder, and the normalisation of whatever error shape an engine sends
// (vLLM, SGLang, TGI, llama.cpp, FastAPI) into that one object. It is a pure
// core package: it imports net/http only for status constants and the one
// helper in write.go that writes an error response, and must never import
// net, os, time-based clocks or any other fencegate package but
// internal/enginetool (a table that imports nothing), nor start goroutines.
package openai
