package failover

import (
	"reflect"
	"slices"
	"testing"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

// checkPassesAsOne holds the shell's batching of a read's chunks to the machine's word
// (Passes): whenever ev is a chunk the machine says it delivers as it is, stepping ev and a
// second such chunk as one chunk must leave the machine exactly where stepping them one by
// one does, with one ActWrite where the two steps have one each and nothing else. Every
// test that drives the harness (the random schedules, the contract's cases) checks it on
// every chunk it steps.
func (s *shell) checkPassesAsOne(ev Event) {
	s.t.Helper()
	if ev.Kind != EvChunk || !Passing(ev.Chunk) || !s.m.Passes(ev.Attempt) {
		return
	}
	s.passChecks++
	second := Event{Kind: EvChunk, Attempt: ev.Attempt, Chunk: sse.Output | sse.Usage, Tokens: 2, Size: 7}
	apart, joined := s.m.clone(), s.m.clone()
	acts := slices.Clone(apart.Step(ev, s.now))
	acts = append(acts, apart.Step(second, s.now)...)
	batch := ev
	batch.Chunk |= second.Chunk
	batch.Tokens += second.Tokens
	batch.Size += second.Size
	one := joined.Step(batch, s.now)
	want := []Action{{Kind: ActWrite, Attempt: ev.Attempt}, {Kind: ActWrite, Attempt: ev.Attempt}}
	if !reflect.DeepEqual(acts, want) {
		s.t.Fatalf("a passing chunk (%v) stepped alone gave %s, not one write", ev.Chunk, kinds(acts))
	}
	if !reflect.DeepEqual(one, want[:1]) {
		s.t.Fatalf("two passing chunks stepped as one gave %s, not one write", kinds(one))
	}
	apart.out, joined.out = nil, nil
	apart.outBuf, joined.outBuf = [4]Action{}, [4]Action{}
	if !reflect.DeepEqual(apart, joined) {
		s.t.Fatalf("two passing chunks stepped as one left the machine at\n%+v\nwhere one by one they left it at\n%+v", joined, apart)
	}
}

// clone is a copy of m that steps on its own.
func (m *Machine) clone() *Machine {
	c := *m
	c.attempts = slices.Clone(m.attempts)
	c.out = c.outBuf[:0]
	return &c
}

// Passes holds from the chunk that crosses the boundary until the attempt stops receiving
// normally: not before the boundary, not while an engine's error event waits for its
// stream's end, not after the request ended.
func TestPassesOnlyWhileDelivering(t *testing.T) {
	s := started(t, streamCfg(), false)
	if s.m.Passes(1) {
		t.Fatal("passes before anything was received")
	}
	s.step(chunk(1, roleOnly))
	if s.m.Passes(1) {
		t.Fatal("passes before the boundary was crossed")
	}
	s.step(chunk(1, output))
	if !s.m.Passes(1) || s.m.Passes(2) {
		t.Fatal("does not pass attempt 1 alone once the boundary was crossed")
	}
	s.step(finishChoice(1, 0))
	if !s.m.Passes(1) {
		t.Fatal("stops passing at a finish_reason, before the stream's end")
	}
	s.step(chunk(1, sse.Done))
	if s.m.Passes(1) {
		t.Fatal("passes after the request completed")
	}

	s = started(t, streamCfg(), false)
	s.step(chunk(1, output))
	s.step(Event{Kind: EvChunk, Attempt: 1, Chunk: sse.Error, Err: &openai.Error{Status: 500, Message: "engine"}})
	if s.m.Passes(1) {
		t.Fatal("passes while the engine's error event waits for the stream's end")
	}
	expectKinds(t, s.step(chunk(1, output)), "")
}

func TestPassingClasses(t *testing.T) {
	for c, want := range map[sse.Class]bool{
		sse.Output: true, sse.Output | sse.Usage: true, sse.Output | sse.ToolCalls: true, sse.Output | sse.NullError: true,
		sse.Output | sse.Finish: false, sse.Output | sse.Error: false, sse.Output | sse.Done: false,
		sse.Usage: false, sse.Finish: false, sse.Comment: false, 0: false, sse.Malformed: false,
	} {
		if Passing(c) != want {
			t.Errorf("Passing(%v) = %v, want %v", c, !want, want)
		}
	}
}
