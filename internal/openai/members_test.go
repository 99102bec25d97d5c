package openai

import "testing"

// NamesOnly reads the names of an object's members as they decode, at its top level only.
func TestNamesOnly(t *testing.T) {
	for raw, want := range map[string]bool{
		`{}`:                     true,
		`{ }`:                    true,
		`{"include_usage":true}`: true,
		`{"incl\u0075de_usage":false,"continuous_usage_stats":true}`: true,
		`{"include_usage":true,"include_usage":false}`:               true,
		`{"include_usage":true,"x":1}`:                               false,
		`{"x":{"include_usage":1}}`:                                  false,
		`null`:                                                       false,
		`[]`:                                                         false,
		``:                                                           false,
	} {
		if got := NamesOnly([]byte(raw), "include_usage", "continuous_usage_stats"); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
}
