package sim

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func TestParseFaultSpec(t *testing.T) {
	plan, err := parseFaultSpec("crash@computed:3, slow:x2.5@prefill,status:503@sent:0;on=b,hang@accept,reset@sent:12")
	if err != nil {
		t.Fatal(err)
	}
	want := []fault{
		{action: actionCrash, point: pointComputed, token: 3},
		{action: actionSlow, factor: 2.5, point: pointPrefill},
		{action: actionStatus, status: 503, point: pointSent, token: 0, on: "b"},
		{action: actionHang, point: pointAccept},
		{action: actionReset, point: pointSent, token: 12},
	}
	if len(plan) != len(want) {
		t.Fatalf("parsed %d faults, want %d", len(plan), len(want))
	}
	for i, f := range plan {
		f.text = ""
		if f != want[i] {
			t.Errorf("fault %d = %+v, want %+v", i, f, want[i])
		}
	}
	if got := plan.forReplica("a").String(); got != "crash@computed:3,slow:x2.5@prefill,hang@accept,reset@sent:12" {
		t.Errorf("forReplica(a) = %q", got)
	}
	for _, bad := range []string{"crash", "boom@accept", "crash@later", "status:200@accept", "slow:x0@prefill", "crash@computed:-1", "crash@sent:x", "crash@accept;off=a", "crash@accept;on="} {
		if _, err := parseFaultSpec(bad); err == nil {
			t.Errorf("parseFaultSpec(%q) succeeded, want an error", bad)
		}
	}
}

func TestFaultFiresAtPoint(t *testing.T) {
	sent2 := fault{point: pointSent, token: 2}
	computed2 := fault{point: pointComputed, token: 2}
	cases := []struct {
		f      fault
		point  faultPoint
		k      int
		stream bool
		want   bool
	}{
		{sent2, pointSent, 2, true, true},
		{sent2, pointComputed, 2, true, false},
		{sent2, pointComputed, 2, false, true}, // non-stream: sent:K acts as computed:K
		{sent2, pointSent, 1, true, false},
		{computed2, pointComputed, 2, true, true},
		{computed2, pointSent, 2, true, false},
		{fault{point: pointPrefill}, pointPrefill, 0, true, true},
		{fault{point: pointPrefill}, pointAccept, 0, true, false},
	}
	for _, c := range cases {
		if got := c.f.firesAt(c.point, c.k, c.stream); got != c.want {
			t.Errorf("%+v firesAt(%d, %d, stream=%v) = %v, want %v", c.f, c.point, c.k, c.stream, got, c.want)
		}
	}
}

// TestSlowFaultScalesDecode checks slow:xN on a fake clock: from the point
// it fires, every pause lasts N times longer.
func TestSlowFaultScalesDecode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plan, err := parseFaultSpec("slow:x3@computed:1")
		if err != nil {
			t.Fatal(err)
		}
		g := &generation{ctx: context.Background(), plan: plan, slow: 1, spec: generationSpec{stream: true}}
		pause := func() time.Duration {
			start := time.Now()
			if !g.pause(10 * time.Millisecond) {
				t.Fatal("pause ended early")
			}
			return time.Since(start)
		}
		if d := pause(); d != 10*time.Millisecond {
			t.Errorf("before the fault: pause took %v, want 10ms", d)
		}
		if g.fire(pointComputed, 0) || g.slow != 1 {
			t.Fatalf("slow fired at token 0 (slow=%v)", g.slow)
		}
		if g.fire(pointComputed, 1) {
			t.Fatal("a slow fault must not end the request")
		}
		if d := pause(); d != 30*time.Millisecond {
			t.Errorf("after slow:x3: pause took %v, want 30ms", d)
		}
	})
}

// faultPoints are the four points, each with what the client and the record
// must show when a request stops there (max_tokens 6, streaming).
var faultPoints = []struct {
	spec     string
	headers  bool // the client got its 200 before the fault
	events   int  // SSE events the client got before the fault
	computed int  // Record.TokensComputed at the fault
	sent     int  // Record.TokensSent at the fault
}{
	{"accept", false, 0, 0, 0},
	{"prefill", true, 0, 0, 0},
	{"computed:2", true, 3, 3, 2}, // role, token 0, token 1
	{"sent:2", true, 4, 3, 3},     // role, tokens 0..2
}

func faultRequest(t *testing.T, s *Server, spec string) *http.Request {
	body := jsonBody(t, chatRequest("fault matrix", map[string]any{"stream": true, "max_tokens": 6, "ignore_eos": true}))
	return newPost(t, testContext(t), s.URL()+"/v1/chat/completions", body, map[string]string{"X-Sim-Fault": spec})
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

func TestFaultCrash(t *testing.T) {
	for _, p := range faultPoints {
		t.Run(p.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			c := newClient(t)
			spec := "crash@" + p.spec
			o := observe(testContext(t), c, faultRequest(t, s, spec), nil)
			if !isReset(o.err) {
				t.Fatalf("client error = %v, want a connection reset", o.err)
			}
			if gotHeaders := o.status == http.StatusOK; gotHeaders != p.headers || len(o.events) != p.events {
				t.Errorf("client saw status %d and %d events, want headers=%v and %d events", o.status, len(o.events), p.headers, p.events)
			}
			rec := s.Records()[0] // ended before the connection was reset
			if rec.Outcome != OutcomeCrashed || rec.Fault != spec || rec.TokensComputed != p.computed || rec.TokensSent != p.sent || rec.Ended.IsZero() {
				t.Errorf("record = %+v", rec)
			}

			_, err := c.Do(faultRequest(t, s, ""))
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("request to a crashed replica: %v, want connection refused", err)
			}
			if err := s.Restart(); err != nil {
				t.Fatalf("Restart: %v", err)
			}
			o = observe(testContext(t), c, faultRequest(t, s, ""), nil)
			if o.err != nil || len(o.events) != 6+3 {
				t.Fatalf("after Restart: %d events, err %v", len(o.events), o.err)
			}
		})
	}
}

func TestFaultReset(t *testing.T) {
	for _, p := range faultPoints {
		t.Run(p.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			c := newClient(t)
			spec := "reset@" + p.spec
			o := observe(testContext(t), c, faultRequest(t, s, spec), nil)
			if !isReset(o.err) {
				t.Fatalf("client error = %v, want a connection reset", o.err)
			}
			if gotHeaders := o.status == http.StatusOK; gotHeaders != p.headers || len(o.events) != p.events {
				t.Errorf("client saw status %d and %d events, want headers=%v and %d events", o.status, len(o.events), p.headers, p.events)
			}
			rec := s.Records()[0]
			if rec.Outcome != OutcomeReset || rec.TokensComputed != p.computed || rec.TokensSent != p.sent {
				t.Errorf("record = %+v", rec)
			}
			// Only that connection died: the replica still serves.
			if o := observe(testContext(t), c, faultRequest(t, s, ""), nil); o.err != nil || len(o.events) != 9 {
				t.Errorf("after reset: %d events, err %v", len(o.events), o.err)
			}
		})
	}
}

func TestFaultHang(t *testing.T) {
	for _, p := range faultPoints {
		t.Run(p.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			c := newClient(t)
			ctx, cancel := context.WithCancel(testContext(t))
			progress := make(chan int, 100)
			result := make(chan observation, 1)
			req := faultRequest(t, s, "hang@"+p.spec)
			go func() { result <- observe(ctx, c, req, progress) }()

			if p.headers {
				waitProgress(t, progress, p.events)
			}
			rec := waitRecord(t, s, func(r Record) bool {
				return r.Fault != "" && r.TokensComputed == p.computed && r.TokensSent == p.sent
			})
			if rec.Outcome != "" {
				t.Fatalf("record ended while hanging: %+v", rec)
			}
			cancel() // the client gives up on the silent stream
			o := <-result
			if !errors.Is(o.err, context.Canceled) {
				t.Errorf("client error = %v, want context.Canceled", o.err)
			}
			if len(o.events) != p.events {
				t.Errorf("client got %d events, want %d: nothing after the hang point", len(o.events), p.events)
			}
			rec = waitRecord(t, s, ended)
			if rec.Outcome != OutcomeHung || rec.TokensComputed != p.computed || rec.TokensSent != p.sent {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func TestFaultHangEndsOnCrash(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	progress := make(chan int, 100)
	result := make(chan observation, 1)
	req := faultRequest(t, s, "hang@sent:0")
	go func() { result <- observe(testContext(t), c, req, progress) }()
	waitProgress(t, progress, 2)
	s.Crash()
	if o := <-result; !isReset(o.err) {
		t.Errorf("client error = %v, want a reset", o.err)
	}
	if rec := s.Records()[0]; rec.Outcome != OutcomeCrashed {
		t.Errorf("record = %+v", rec)
	}
}

func TestFaultStatus(t *testing.T) {
	for _, p := range faultPoints {
		t.Run(p.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			c := newClient(t)
			o := observe(testContext(t), c, faultRequest(t, s, "status:503@"+p.spec), nil)
			if o.err != nil {
				t.Fatalf("client error: %v", o.err)
			}
			var e errorBody
			if !p.headers {
				if o.status != http.StatusServiceUnavailable {
					t.Fatalf("status = %d, want 503", o.status)
				}
				e = decodeError(t, o.body)
			} else {
				if o.status != http.StatusOK || len(o.events) != p.events+1 {
					t.Fatalf("status %d, %d events, want 200 and %d events then the error", o.status, len(o.events), p.events)
				}
				e = decodeError(t, []byte(o.events[p.events])) // the last event: no [DONE] after it
			}
			if e.Error.Code != 503 || e.Error.Type != "ServiceUnavailableError" || e.Error.Param != nil || e.Error.Message == "" {
				t.Errorf("error = %+v", *e.Error)
			}
			rec := s.Records()[0]
			if rec.Outcome != OutcomeError || rec.TokensComputed != p.computed || rec.TokensSent != p.sent {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func TestFaultStatusThenDoneLikeVLLM(t *testing.T) {
	s := startSim(t, Config{DoneAfterStreamError: true})
	o := observe(testContext(t), newClient(t), faultRequest(t, s, "status:500@sent:0"), nil)
	if len(o.events) != 4 || o.events[3] != "[DONE]" || decodeError(t, []byte(o.events[2])).Error.Code != 500 {
		t.Errorf("events = %q, want role, token, error, [DONE]", o.events)
	}
}

func TestFaultSlowCompletes(t *testing.T) {
	for _, p := range faultPoints {
		t.Run(p.spec, func(t *testing.T) {
			s := startSim(t, Config{DecodePerToken: time.Microsecond})
			o := observe(testContext(t), newClient(t), faultRequest(t, s, "slow:x2@"+p.spec), nil)
			if o.err != nil || len(o.events) != 9 || o.events[8] != "[DONE]" {
				t.Fatalf("%d events, err %v", len(o.events), o.err)
			}
			if rec := waitRecord(t, s, ended); rec.Outcome != OutcomeFinished || rec.Fault != "slow:x2@"+p.spec {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func TestNonStreamSentActsAsComputed(t *testing.T) {
	s := startSim(t, Config{})
	body := jsonBody(t, chatRequest("x", map[string]any{"max_tokens": 6, "ignore_eos": true}))
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", body, map[string]string{"X-Sim-Fault": "status:500@sent:3"})
	if status != http.StatusInternalServerError || decodeError(t, b).Error.Type != "InternalServerError" {
		t.Fatalf("status %d: %s", status, b)
	}
	if rec := s.Records()[0]; rec.TokensComputed != 4 || rec.TokensSent != 0 || rec.Outcome != OutcomeError {
		t.Errorf("record = %+v", rec)
	}
}

func TestArmFaultCount(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	if err := s.ArmFault("status:500@accept", 2); err != nil {
		t.Fatal(err)
	}
	send := func(header map[string]string) int {
		status, _ := postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("armed", nil)), header)
		return status
	}
	// A request's own header wins and leaves the armed count alone.
	if got := send(map[string]string{"X-Sim-Fault": "status:429@accept"}); got != http.StatusTooManyRequests {
		t.Errorf("with header: %d, want 429", got)
	}
	for i, want := range []int{500, 500, 200, 200} {
		if got := send(nil); got != want {
			t.Errorf("request %d: status %d, want %d", i, got, want)
		}
	}
	if err := s.ArmFault("bogus", 1); err == nil {
		t.Error("ArmFault accepted a bad spec")
	}

	// The control endpoint arms the same way; count defaults to 1.
	status, b := postJSON(t, c, s.URL()+"/sim/faults", []byte(`{"fault":"status:503@accept"}`), nil)
	if status != http.StatusOK {
		t.Fatalf("POST /sim/faults: %d %s", status, b)
	}
	for i, want := range []int{503, 200} {
		if got := send(nil); got != want {
			t.Errorf("after /sim/faults, request %d: status %d, want %d", i, got, want)
		}
	}
	if status, _ := postJSON(t, c, s.URL()+"/sim/faults", []byte(`{"fault":"explode@accept","count":1}`), nil); status != http.StatusBadRequest {
		t.Errorf("bad spec on /sim/faults: status %d, want 400", status)
	}
	recs := s.Records()
	if len(recs) != 7 || recs[1].Fault != "status:500@accept" || recs[3].Fault != "" {
		t.Errorf("records: %+v", recs)
	}
}

func TestFaultTargetsOneReplica(t *testing.T) {
	a := startSim(t, Config{Name: "a"})
	b := startSim(t, Config{Name: "b"})
	c := newClient(t)
	header := map[string]string{"X-Sim-Fault": "status:500@accept;on=a,status:503@accept;on=b,slow:x2@prefill"}
	body := jsonBody(t, chatRequest("targeted", nil))
	if status, _ := postJSON(t, c, a.URL()+"/v1/chat/completions", body, header); status != 500 {
		t.Errorf("replica a: %d, want 500", status)
	}
	if status, _ := postJSON(t, c, b.URL()+"/v1/chat/completions", body, header); status != 503 {
		t.Errorf("replica b: %d, want 503", status)
	}
	if got := a.Records()[0].Fault; got != "status:500@accept;on=a,slow:x2@prefill" {
		t.Errorf("a's record fault = %q", got)
	}
	only := map[string]string{"X-Sim-Fault": "crash@accept;on=a"}
	if status, _ := postJSON(t, c, b.URL()+"/v1/chat/completions", body, only); status != 200 {
		t.Errorf("replica b with a fault for a: %d, want 200", status)
	}
	if got := b.Records()[1].Fault; got != "" {
		t.Errorf("b's record fault = %q, want none", got)
	}
}

func TestBadFaultHeaderIsRejected(t *testing.T) {
	s := startSim(t, Config{})
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", nil)), map[string]string{"X-Sim-Fault": "crash@nowhere"})
	if status != http.StatusBadRequest || !strings.Contains(decodeError(t, b).Error.Message, "nowhere") {
		t.Errorf("status %d: %s", status, b)
	}
}
