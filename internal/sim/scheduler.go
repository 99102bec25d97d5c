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
// FIFO order, at most maxWaiting of them (0 = no limit). It also sums the KV
// blocks held by running sequences for vllm:kv_cache_usage_perc.
type scheduler struct {
	maxRunning int
	maxWaiting int

	mu       sync.Mutex
	running  int
	waiting  list.List // of *ticket, oldest first
	kvBlocks int
}

// ticket is one request's place in the scheduler.
type ticket struct {
	ready   chan struct{} // closed when the request holds a running slot
	granted bool          // guarded by scheduler.mu
	elem    *list.Element // position in the waiting list while queued
}

func newScheduler(maxRunning, maxWaiting int) *scheduler {
	return &scheduler{maxRunning: maxRunning, maxWaiting: maxWaiting}
}

// enqueue takes a running slot at once when one is free and nobody waits,
// else joins the queue, else fails with errQueueFull.
func (s *scheduler) enqueue() (*ticket, error) {
	t := &ticket{ready: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running < s.maxRunning && s.waiting.Len() == 0 {
		s.running++
		t.granted = true
		close(t.ready)
		return t, nil
	}
	if s.maxWaiting > 0 && s.waiting.Len() >= s.maxWaiting {
		return nil, errQueueFull
	}
	t.elem = s.waiting.PushBack(t)
	return t, nil
}

// wait blocks until t holds a running slot or ctx ends. On a ctx error the
// ticket is given up (and a slot granted meanwhile passed on), so the caller
// must call release only after a nil return.
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
	}
	s.mu.Unlock()
	if granted {
		s.release()
	}
	return ctx.Err()
}

// release frees a running slot, handing it straight to the oldest waiter.
func (s *scheduler) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	front := s.waiting.Front()
	if front == nil {
		s.running--
		return
	}
	next := s.waiting.Remove(front).(*ticket)
	next.granted = true
	close(next.ready)
}

// addBlocks changes the KV blocks held by running sequences by delta.
func (s *scheduler) addBlocks(delta int) {
	s.mu.Lock()
	s.kvBlocks += delta
	s.mu.Unlock()
}

// load returns the running and waiting counts and the KV blocks in use.
func (s *scheduler) load() (running, waiting, kvBlocks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.waiting.Len(), s.kvBlocks
}
