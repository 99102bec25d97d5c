package sim

import "testing"

func TestPythonRenderings(t *testing.T) {
	if got, want := pyRepr([]byte(`{"a": "it's", "b": [1, 2.5, 1e20, 1.0, true, null], "c": "x\ny\u0001", "d": {}}`)),
		`{'a': "it's", 'b': [1, 2.5, 1e+20, 1.0, True, None], 'c': 'x\ny\x01', 'd': {}}`; got != want {
		t.Errorf("pyRepr = %s\nwant     %s", got, want)
	}
	for f, want := range map[float64]string{1: "1.0", 1e-5: "1e-05", 0.0001: "0.0001", 1e16: "1e+16", 0.1: "0.1", -2.5e-7: "-2.5e-07", 123456789012345680: "1.2345678901234568e+17"} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %s, want %s", f, got, want)
		}
	}
	if got := pyTuple([]any{"body"}); got != "('body',)" {
		t.Errorf("pyTuple = %s", got)
	}
	if got := cleanLoc([]any{"body", "messages", 0, "content", "list[AnthropicContentBlock]", 1, "type"}); got != "body.messages.0.content.1.type" {
		t.Errorf("cleanLoc = %s", got)
	}
	// What CPython's json.loads says of arguments cut after each token.
	for s, want := range map[string]string{
		`{"city": "alpha bravo"}`: "",
		`{"`:                      "Unterminated string starting at: line 1 column 2 (char 1)",
		`{"city":`:                "Expecting value: line 1 column 9 (char 8)",
		`{"city": "alpha`:         "Unterminated string starting at: line 1 column 10 (char 9)",
		`{"city": "alpha bravo"`:  "Expecting ',' delimiter: line 1 column 23 (char 22)",
		`{"n": 42`:                "Expecting ',' delimiter: line 1 column 9 (char 8)",
		`{"n": 42,`:               "Expecting property name enclosed in double quotes: line 1 column 10 (char 9)",
		`{"n"`:                    "Expecting ':' delimiter: line 1 column 5 (char 4)",
		`{`:                       "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
		`{} x`:                    "Extra data: line 1 column 4 (char 3)",
	} {
		if got := pyJSONError(s); got != want {
			t.Errorf("pyJSONError(%q) = %q, want %q", s, got, want)
		}
	}
	if got := truncateInputValue("{'error': {'message': 'Internal server error', 'type': 'InternalServerError', 'param': None, 'code': 500}}"); got != "{'error': {'message': 'In...am': None, 'code': 500}}" {
		t.Errorf("truncateInputValue = %s", got)
	}
}
