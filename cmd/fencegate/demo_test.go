package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's first command, run as printed: the demo's five steps are read from what it
// prints and run as a shell would run them (curl's requests made with net/http, the
// pipeline that keeps the X-Request-Id run by sh on curl's output, the replay run as the
// printed program), and each does what its comment says.
func TestDemoStepsRunAsPrinted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--replica-base-port", "0", "--decode-per-token", "0s"}, pw, io.Discard)
		pw.Close()
	}()
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "Ctrl-C stops everything") {
			break
		}
	}
	if !strings.Contains(printed.String(), "Ctrl-C") {
		t.Fatalf("the demo stopped before printing its steps: %v\n%s", <-done, printed.String())
	}
	go io.Copy(io.Discard, pr)
	if !strings.Contains(printed.String(), "filler") || !strings.Contains(printed.String(), "not a model's text") {
		t.Errorf("the demo does not say that its text is simulated:\n%s", printed.String())
	}
	steps := demoCommands(printed.String())
	if len(steps) != 5 {
		t.Fatalf("want 5 printed commands, got %d:\n%s", len(steps), printed.String())
	}
	vars := map[string]string{}

	// 1. A complete streamed answer.
	resp, body := curl(t, words(steps[0], vars))
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("step 1: %d\n%s", resp.StatusCode, body)
	}

	// 2. sim-1 crashes during prefill; the request is rerun and completes on another
	// replica, as its record tells.
	resp, body = curl(t, words(steps[1], vars))
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(body), "data: [DONE]\n\n") || strings.Contains(string(body), `"error"`) {
		t.Fatalf("step 2: %d\n%s", resp.StatusCode, body)
	}
	rec := requestRecord(t, resp)
	if rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[0].Replica != "sim-1" || rec.Attempts[1].Replica == "sim-1" {
		t.Fatalf("step 2's record: %+v", rec)
	}

	// 3. The pipeline: curl's part made here, the rest run by sh on what curl -i prints.
	cmd, ok := strings.CutPrefix(steps[2], "id=$(")
	if !ok || !strings.HasSuffix(cmd, ")") {
		t.Fatalf("step 3 does not keep the id: %s", steps[2])
	}
	pipeline := splitTop(strings.TrimSuffix(cmd, ")"), "|")
	resp, body = curl(t, words(pipeline[0], vars))
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "[DONE]") ||
		!strings.Contains(string(body), `"code":"upstream_decode_interrupted"`) || !strings.Contains(string(body), `"partial_output":true`) {
		t.Fatalf("step 3: %d\n%s", resp.StatusCode, body)
	}
	var shown bytes.Buffer
	fmt.Fprintf(&shown, "HTTP/1.1 %s\r\n", resp.Status)
	resp.Header.Write(&shown)
	shown.WriteString("\r\n")
	shown.Write(body)
	sh := exec.Command("sh", "-c", strings.Join(pipeline[1:], "|"))
	sh.Stdin, sh.Stderr = &shown, io.Discard
	id, err := sh.Output()
	if err != nil {
		t.Fatalf("step 3's pipeline: %v", err)
	}
	vars["id"] = strings.TrimRight(string(id), "\n") // as $(...) does
	if want := resp.Header.Get("X-Request-Id"); vars["id"] != want || want == "" {
		t.Fatalf("step 3 kept the id %q, want %q", id, want)
	}

	// 4. The request's record: interrupted after output. (A first attempt may have found
	// sim-1 still down from step 2: a refused dial, rerun at no cost.)
	resp, body = curl(t, words(steps[3], vars))
	rec = decodeRecord(t, resp, body)
	if rec.Outcome != "interrupted" || !rec.FirstDeltaSent || len(rec.Attempts) == 0 {
		t.Fatalf("step 4: %s", body)
	}
	served := rec.Attempts[len(rec.Attempts)-1].Replica

	// 5. The trace into a temporary file (nothing written where the user stands), then the
	// replay, without --url, on the replica of the trace: the same fault at the same point.
	chain := splitTop(steps[4], "&&")
	if len(chain) != 3 || strings.TrimSpace(chain[0]) != "trace=$(mktemp)" {
		t.Fatalf("step 5: %s", steps[4])
	}
	vars["trace"] = filepath.Join(t.TempDir(), "tmp.XXXXXXXXXX")
	w := words(chain[1], vars)
	if w[len(w)-2] != "-o" || w[len(w)-1] != vars["trace"] {
		t.Fatalf("step 5 does not write the trace to the temporary file: %s", chain[1])
	}
	resp, body = curl(t, w[:len(w)-2])
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("step 5's trace: %d %s", resp.StatusCode, body)
	}
	if err := os.WriteFile(vars["trace"], body, 0o600); err != nil {
		t.Fatal(err)
	}
	replayCmd := words(chain[2], vars)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if replayCmd[0] != exe && replayCmd[0] != "fencegate" {
		t.Fatalf("step 5 runs %q, which is neither this program (%s) nor fencegate", replayCmd[0], exe)
	}
	var out, errOut bytes.Buffer
	err = run(ctx, replayCmd[1:], &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "verdict: same_point") {
		t.Fatalf("step 5's replay: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "replaying "+vars["id"]+" on "+served+" ") {
		t.Fatalf("the replay did not go to %s, the replica that served the client: %s", served, errOut.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo ended with %v", err)
	}
}

// demoCommands returns the commands the demo printed: its indented lines that are not
// comments.
func demoCommands(printed string) []string {
	var out []string
	for _, l := range strings.Split(printed, "\n") {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(strings.TrimSpace(l), "#") && strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// splitTop splits a shell command at sep where it stands outside quotes.
func splitTop(s, sep string) []string {
	var parts []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case strings.HasPrefix(s[i:], sep):
			parts = append(parts, s[start:i])
			start = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(parts, s[start:])
}

// words splits a simple command as a POSIX shell does: single quotes keep everything,
// double quotes and bare words expand $name from vars.
func words(s string, vars map[string]string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	expand := func(i int) int {
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		cur.WriteString(vars[s[i+1:j]])
		return j - 1
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '$' {
					i = expand(i)
					continue
				}
				cur.WriteByte(s[i])
			}
		case '$':
			inWord = true
			i = expand(i)
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// curl makes the request a curl command line of the demo's makes (-d: a POST with that
// body; -H: a header; -N, -s and -i change only what curl shows) and reads the answer.
func curl(t *testing.T, w []string) (*http.Response, []byte) {
	t.Helper()
	if len(w) == 0 || w[0] != "curl" {
		t.Fatalf("not a curl command: %q", w)
	}
	var url, data string
	header := http.Header{}
	for i := 1; i < len(w); i++ {
		switch w[i] {
		case "-N", "-s", "-i", "-sN", "-Ni", "-sNi":
		case "-H":
			i++
			k, v, _ := strings.Cut(w[i], ":")
			header.Add(k, strings.TrimSpace(v))
		case "-d":
			i++
			data = w[i]
		default:
			if strings.HasPrefix(w[i], "-") || url != "" {
				t.Fatalf("curl option %q is not one the test knows: %q", w[i], w)
			}
			url = w[i]
		}
	}
	method, body := http.MethodGet, io.Reader(nil)
	if data != "" {
		method, body = http.MethodPost, strings.NewReader(data)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp, b
}

// demoRecord is the part of GET /v1/requests/{id} the steps are about.
type demoRecord struct {
	Outcome        string `json:"outcome"`
	FirstDeltaSent bool   `json:"first_delta_sent"`
	Attempts       []struct {
		Replica string `json:"replica"`
	} `json:"attempts"`
}

// requestRecord reads the record of the request resp answered.
func requestRecord(t *testing.T, resp *http.Response) demoRecord {
	t.Helper()
	u := *resp.Request.URL
	u.Path, u.RawQuery = "/v1/requests/"+resp.Header.Get("X-Request-Id"), "wait=10s"
	r, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return decodeRecord(t, r, b)
}

func decodeRecord(t *testing.T, resp *http.Response, body []byte) demoRecord {
	t.Helper()
	var rec demoRecord
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &rec) != nil {
		t.Fatalf("request record: %d %s", resp.StatusCode, body)
	}
	return rec
}
