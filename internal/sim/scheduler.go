package sim

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// errQueueFull is returned by enqueue when MaxWaiting requests already wait.
var errQueueFull = errors.New("sim: waiting queue is full")

// scheduler admits at most maxRunning sequences at once; the rest wait in
// FIFO order, at most maxWaiting requests of them (0 = no limit). A request
// with several sequences (n > 1, or a prompt array) takes one slot per
// sequence, as vLLM schedules each of its child requests as a sequence of
// its own; it takes at most maxRunning slots, since the sim decodes a
// request's sequences in lockstep where vLLM would run the surplus in a
// later wave. The scheduler also sums the KV blocks held by running
// sequences for vllm:kv_cache_usage_perc.
type scheduler struct {
	maxRunning int
	maxWaiting int

	mu           sync.Mutex
	running      int       // slots held
	waiting      list.List // of *ticket, oldest first
	waitingSlots int       // slots the waiting tickets ask for
	kvBlocks     int
}

// ticket is one request's place in the scheduler.
type ticket struct {
	slots   int
	ready   chan struct{} // closed when the request holds its running slots
	granted bool          // guarded by scheduler.mu
	elem    *list.Element // position in the waiting list while queued
}

func newScheduler(maxRunning, maxWaiting int) *scheduler {
	return &scheduler{maxRunning: maxRunning, maxWaiting: maxWaiting}
}

// enqueue is enqueueSlots for a request of one sequence.
func (s *scheduler) enqueue() (*ticket, error) { return s.enqueueSlots(1) }

// enqueueSlots takes slots running slots at once when they are free and
// nobody waits, else joins the queue, else fails with errQueueFull.
func (s *scheduler) enqueueSlots(slots int) (*ticket, error) {
	slots = max(1, min(slots, s.maxRunning))
	t := &ticket{slots: slots, ready: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running+slots <= s.maxRunning && s.waiting.Len() == 0 {
		s.running += slots
		t.granted = true
		close(t.ready)
		return t, nil
	}
	if s.maxWaiting > 0 && s.waiting.Len() >= s.maxWaiting {
		return nil, errQueueFull
	}
	t.elem = s.waiting.PushBack(t)
	s.waitingSlots += slots
	return t, nil
}

// wait blocks until t holds its running slots or ctx ends. On a ctx error
// the ticket is given up (and slots granted meanwhile passed on), so the
// caller must call release only after a nil return.
func (s *scheduler) wait(ctx context.Context, t *ticket) error {
	select {
	case <-t.ready: // a granted slot wins over a cancel that raced with it
		return nil
	default:
	}
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	granted := t.granted
	if !granted {
		s.waiting.Remove(t.elem)
		s.waitingSlots -= t.slots
		s.grantLocked() // a large request leaving may let smaller ones in
	}
	s.mu.Unlock()
	if granted {
		s.releaseSlots(t.slots)
	}
	return ctx.Err()
}

// release frees the one slot of a ticket from enqueue.
func (s *scheduler) release() { s.releaseSlots(1) }

// releaseSlots frees running slots and hands them to the waiters in order.
func (s *scheduler) releaseSlots(slots int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running -= slots
	s.grantLocked()
}

// grantLocked admits waiting tickets, oldest first, while their slots fit;
// FIFO is strict, so a small request never overtakes a large one.
func (s *scheduler) grantLocked() {
	for front := s.waiting.Front(); front != nil; front = s.waiting.Front() {
		next := front.Value.(*ticket)
		if s.running+next.slots > s.maxRunning {
			return
		}
		s.waiting.Remove(front)
		s.waitingSlots -= next.slots
		s.running += next.slots
		next.granted = true
		close(next.ready)
	}
}

// addBlocks changes the KV blocks held by running sequences by delta.
func (s *scheduler) addBlocks(delta int) {
	s.mu.Lock()
	s.kvBlocks += delta
	s.mu.Unlock()
}

// load returns the running and waiting sequence counts and the KV blocks in
// use.
func (s *scheduler) load() (running, waiting, kvBlocks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.waitingSlots, s.kvBlocks
}
