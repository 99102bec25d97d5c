package openai

import "github.com/fencegate/fencegate/internal/jsonstr"

// appendString appends s as a JSON string exactly as encoding/json.Marshal writes it
// (jsonstr.JSON).
func appendString(dst []byte, s string) []byte { return jsonstr.JSON.Append(dst, s) }

// AppendString appends s as a JSON string, exactly as encoding/json writes it.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }
