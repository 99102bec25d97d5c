package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// A fault spec is "ACTION@POINT", several separated by commas, each with an
// optional ";on=NAME" suffix that restricts it to the replica of that name:
//
//	crash@computed:3
//	slow:x4@prefill,reset@sent:10;on=replica-b
//
// The actions and points are documented on their constants below;
// parseFaultSpec is the one place that knows the grammar. A fault is armed
// per request by the X-Sim-Fault header, or for the next N requests by
// Server.ArmFault or POST /sim/faults.

// faultAction is what a fault does when its point is reached.
type faultAction int

const (
	actionCrash  faultAction = iota + 1 // the whole replica dies, as Server.Crash
	actionReset                         // this connection only is reset (RST)
	actionHang                          // stop writing, keep the connection open
	actionStatus                        // an HTTP status, or a mid-stream error event after headers
	actionSlow                          // decode (and any prefill still to come) N times slower
)

// faultPoint is where in a request's life a fault fires.
type faultPoint int

const (
	pointAccept   faultPoint = iota + 1 // request received, nothing sent, not even headers
	pointPrefill                        // admitted, headers sent (stream), prefill starting
	pointComputed                       // output token K computed, not yet written
	pointSent                           // output token K written and flushed
)

// K counts the request's output tokens from 0 in the order they are
// computed: with n > 1 or a prompt array, decode step by step and choice by
// choice within a step, so Record.TokensComputed is K+1 when computed:K
// fires. With Config.StreamInterval above 1 a chunk carries several tokens:
// computed:K fires as soon as token K exists, so the tokens computed before
// it but still waiting for their chunk are never sent; sent:K fires once
// the whole chunk that carries token K is flushed, so Record.TokensSent
// then counts every token of that chunk, which may be more than K+1.

// fault is one parsed ACTION@POINT item.
type fault struct {
	action faultAction
	status int     // for actionStatus
	factor float64 // for actionSlow
	point  faultPoint
	token  int    // K of computed:K / sent:K
	on     string // replica name it is restricted to; "" = any
	text   string // the item as written, for Record.Fault
}

// faultPlan is the list of faults applied to one request.
type faultPlan []fault

// parseFaultSpec parses a whole spec. An empty spec is an empty plan.
func parseFaultSpec(spec string) (faultPlan, error) {
	var plan faultPlan
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f, err := parseFault(item)
		if err != nil {
			return nil, fmt.Errorf("sim: fault %q: %w", item, err)
		}
		plan = append(plan, f)
	}
	return plan, nil
}

func parseFault(item string) (fault, error) {
	f := fault{text: item}
	body := item
	if i := strings.IndexByte(item, ';'); i >= 0 {
		body = item[:i]
		opt := strings.TrimSpace(item[i+1:])
		name, ok := strings.CutPrefix(opt, "on=")
		if !ok || name == "" {
			return f, fmt.Errorf("unknown option %q (want on=NAME)", opt)
		}
		f.on = name
	}
	action, point, ok := strings.Cut(body, "@")
	if !ok {
		return f, fmt.Errorf("want ACTION@POINT")
	}
	if err := f.parseAction(strings.TrimSpace(action)); err != nil {
		return f, err
	}
	if err := f.parsePoint(strings.TrimSpace(point)); err != nil {
		return f, err
	}
	return f, nil
}

func (f *fault) parseAction(s string) error {
	switch {
	case s == "crash":
		f.action = actionCrash
	case s == "reset":
		f.action = actionReset
	case s == "hang":
		f.action = actionHang
	case strings.HasPrefix(s, "status:"):
		code, err := strconv.Atoi(s[len("status:"):])
		if err != nil || code < 400 || code > 599 {
			return fmt.Errorf("status must be an HTTP error code 400..599, got %q", s)
		}
		f.action, f.status = actionStatus, code
	case strings.HasPrefix(s, "slow:x"):
		n, err := strconv.ParseFloat(s[len("slow:x"):], 64)
		if err != nil || !(n > 0) {
			return fmt.Errorf("slow needs a positive factor as in slow:x4, got %q", s)
		}
		f.action, f.factor = actionSlow, n
	default:
		return fmt.Errorf("unknown action %q (want crash, reset, hang, status:N or slow:xN)", s)
	}
	return nil
}

func (f *fault) parsePoint(s string) error {
	switch {
	case s == "accept":
		f.point = pointAccept
	case s == "prefill":
		f.point = pointPrefill
	case strings.HasPrefix(s, "computed:"), strings.HasPrefix(s, "sent:"):
		name, k, _ := strings.Cut(s, ":")
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 {
			return fmt.Errorf("token index must be a non-negative integer, got %q", s)
		}
		f.point, f.token = pointComputed, n
		if name == "sent" {
			f.point = pointSent
		}
	default:
		return fmt.Errorf("unknown point %q (want accept, prefill, computed:K or sent:K)", s)
	}
	return nil
}

// forReplica keeps the faults that apply to the replica called name.
func (p faultPlan) forReplica(name string) faultPlan {
	var out faultPlan
	for _, f := range p {
		if f.on == "" || f.on == name {
			out = append(out, f)
		}
	}
	return out
}

// String joins the items as written, for Record.Fault.
func (p faultPlan) String() string {
	texts := make([]string, len(p))
	for i, f := range p {
		texts[i] = f.text
	}
	return strings.Join(texts, ",")
}

// firesAt reports whether f fires at point (with token index k). A
// non-stream reply writes nothing per token, so there sent:K fires where
// computed:K does.
func (f fault) firesAt(point faultPoint, k int, stream bool) bool {
	if f.point == pointComputed || f.point == pointSent {
		if f.token != k {
			return false
		}
		if !stream && point == pointComputed {
			return true
		}
	}
	return f.point == point
}
