package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

func TestParseErrorHang(t *testing.T) {
	plan, err := parseFaultSpec("error:hang@sent:4;on=b")
	if err != nil {
		t.Fatal(err)
	}
	want := fault{action: actionError, hang: true, point: pointSent, token: 4, on: "b", text: "error:hang@sent:4;on=b"}
	if len(plan) != 1 || plan[0] != want {
		t.Errorf("plan = %+v, want %+v", plan, want)
	}
	if _, err := parseFaultSpec("error:hung@sent:4"); err == nil {
		t.Error("a misspelt action was accepted")
	}
}

// error:hang on each streaming endpoint: the endpoint's error event, then nothing, with
// the connection open, until the client leaves; the record ends only then, as
// error_hung. Before the stream headers it is the HTTP 500 of error.
func TestFaultErrorHang(t *testing.T) {
	cases := []struct {
		endpoint string
		request  func(t *testing.T, s *Server, spec string) *http.Request
		events   int // events before sent:2's fault fires
		check    func(t *testing.T, ev namedEvent)
	}{
		{"chat", faultRequest, 4, func(t *testing.T, ev namedEvent) {
			if ev.name != "" || ev.data != vllmStreamError {
				t.Errorf("error event %+v, want vLLM's %s", ev, vllmStreamError)
			}
		}},
		{"messages", func(t *testing.T, s *Server, spec string) *http.Request {
			return messagesFaultRequest(t, s, spec, true)
		}, 5,
			func(t *testing.T, ev namedEvent) {
				var e struct {
					Type  string `json:"type"`
					Error struct {
						Type string `json:"type"`
					} `json:"error"`
				}
				if ev.name != "error" || json.Unmarshal([]byte(ev.data), &e) != nil || e.Type != "error" || e.Error.Type != "internal_error" {
					t.Errorf("error event %+v, want the converter's internal_error", ev)
				}
			}},
		{"responses", func(t *testing.T, s *Server, spec string) *http.Request {
			return responsesFaultRequest(t, s, spec, true)
		}, 7,
			func(t *testing.T, ev namedEvent) {
				// The seven events before it are numbered 0 to 6.
				want := `{"code":"server_error","message":"Internal server error","param":null,"sequence_number":7,"type":"error"}`
				if ev.name != "error" || ev.data != want {
					t.Errorf("error event %+v, want %s", ev, want)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.endpoint+"/accept", func(t *testing.T) {
			s := startSim(t, Config{})
			o := observeNamed(testContext(t), newClient(t), c.request(t, s, "error:hang@accept"), nil)
			if o.status != http.StatusInternalServerError || o.err != nil {
				t.Errorf("status %d, err %v, want the HTTP 500 of error", o.status, o.err)
			}
			if rec := s.Records()[0]; rec.Outcome != OutcomeError {
				t.Errorf("record = %+v", rec)
			}
		})
		t.Run(c.endpoint+"/sent:2", func(t *testing.T) {
			s := startSim(t, Config{})
			ctx, cancel := context.WithCancel(testContext(t))
			progress := make(chan int, 100)
			done := make(chan namedObservation, 1)
			req := c.request(t, s, "error:hang@sent:2")
			go func() { done <- observeNamed(ctx, newClient(t), req, progress) }()
			waitProgress(t, progress, c.events+1)
			// The error event is out and the stream has not ended: the record is still open.
			if rec := s.Records()[0]; rec.Outcome != "" {
				t.Fatalf("record ended after the error event: %+v", rec)
			}
			cancel() // the client gives up on the silent stream
			o := <-done
			if !errors.Is(o.err, context.Canceled) {
				t.Errorf("client error %v, want its own cancel (the sim must not end the stream)", o.err)
			}
			if len(o.events) != c.events+1 {
				t.Fatalf("events %q, want %d and the error event, nothing after it", o.names(), c.events)
			}
			c.check(t, o.events[c.events])
			if rec := waitRecord(t, s, ended); rec.Outcome != OutcomeErrorHung || rec.TokensComputed != 3 || rec.TokensSent != 3 {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}
