package request

// replayBuffer keeps what a keyed request's client received, so that a retry with the same
// Idempotency-Key is answered with the same bytes. It is bounded: an answer larger than
// the bound is not kept, and its retries are told so (replay_unavailable).
type replayBuffer struct {
	buf      []byte
	max      int
	overflow bool
}

func newReplayBuffer(max int) *replayBuffer { return &replayBuffer{max: max} }

// add appends bytes written to the client.
func (r *replayBuffer) add(b []byte) {
	if r == nil || r.overflow {
		return
	}
	if len(r.buf)+len(b) > r.max {
		r.overflow, r.buf = true, nil
		return
	}
	r.buf = append(r.buf, b...)
}

// set replaces the kept response (an error answer that replaced the headers).
func (r *replayBuffer) set(b []byte) {
	if r == nil {
		return
	}
	r.overflow = len(b) > r.max
	r.buf = nil
	if !r.overflow {
		r.buf = append(r.buf, b...)
	}
}

// response returns the kept bytes, and false when they were too large to keep.
func (r *replayBuffer) response() ([]byte, bool) {
	if r == nil || r.overflow {
		return nil, false
	}
	return r.buf, true
}
