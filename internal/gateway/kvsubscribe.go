package gateway

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fencegate/fencegate/internal/kvevents"
)

// kvSubscription reads one replica's KV events: a ZMQ SUB socket connected to the
// engine's PUB socket, each message three frames (topic, sequence number as 8 bytes
// big-endian, msgpack batch), handed to the pool, whose tracker decides (kvpool.go). A
// gap in the sequence is asked again from the engine's replay socket: a DEALER sends
// ["", start (8 bytes big-endian)] and reads ["", seq, batch] until seq is -1. The
// subscription is redialled, with backoff, when it fails or its events are late.
type kvSubscription struct {
	replica string
	cancel  context.CancelFunc
}

func (k *kvSubscription) stop() { k.cancel() }

// discardLogger silences the ZMQ library's own log lines: what they tell, a connection
// that failed, is logged (once per change of state) by the subscription.
var discardLogger = log.New(io.Discard, "", 0)

// Bounds of the subscription's waits: redials back off from kvRedialMin to kvRedialMax;
// a replay that has not ended after kvReplayTimeout is given up (the gap is then lost).
const (
	kvRedialMin     = 250 * time.Millisecond
	kvRedialMax     = 30 * time.Second
	kvReplayTimeout = 5 * time.Second
)

// subscribeKV starts reading replica's events, until the pool stops them or the gateway
// closes. Callers hold p.mu.
func (s *Server) subscribeKV(p *pool, replica string, kv *kvMember) *kvSubscription {
	ctx, cancel := context.WithCancel(s.backgroundCtx)
	sub := &kvSubscription{replica: replica, cancel: cancel}
	cfg, late, model := kv.cfg, kv.cfg.LateAfter.D(), p.b.Model
	s.goBackground(func() {
		backoff := kvRedialMin
		for ctx.Err() == nil {
			why := s.readKV(ctx, p, sub, cfg.Endpoint, cfg.ReplayEndpoint, cfg.Topic, late)
			if ctx.Err() != nil {
				return
			}
			s.logKV(model, p.kvDown(sub, why))
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, kvRedialMax)
		}
	})
	return sub
}

// kvMessage is one message off the SUB socket, or the error that ended the reading.
type kvMessage struct {
	msg zmq4.Msg
	err error
}

// readKV reads one connection's messages until it fails, its events are late, or ctx
// ends, and says why it stopped.
func (s *Server) readKV(ctx context.Context, p *pool, sub *kvSubscription, endpoint, replay, topic string, late time.Duration) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sock := zmq4.NewSub(ctx, zmq4.WithDialerMaxRetries(0), zmq4.WithLogger(discardLogger))
	defer sock.Close()
	if err := sock.SetOption(zmq4.OptionSubscribe, topic); err != nil {
		return fmt.Sprintf("subscription to %s: %v", endpoint, err)
	}
	if err := sock.Dial(endpoint); err != nil {
		return fmt.Sprintf("subscription to %s: %v", endpoint, err)
	}
	msgs := make(chan kvMessage)
	go func() {
		for {
			m, err := sock.Recv()
			select {
			case msgs <- kvMessage{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(max(late/4, 10*time.Millisecond))
	defer tick.Stop()
	model := p.b.Model
	for {
		select {
		case <-ctx.Done():
			return "stopped"
		case <-tick.C:
			if c := p.kvCheck(sub, s.now()); c != nil {
				s.logKV(model, c)
				return c.reason // a connection gone silent: dial again
			}
		case m := <-msgs:
			if m.err != nil {
				return fmt.Sprintf("subscription to %s: %v", endpoint, m.err)
			}
			seq, b, err := parseKVMessage(m.msg.Frames)
			if err != nil {
				// Not applied: the batch after it shows the gap, which a replay may fill.
				s.log.Warn("replica's KV event batch not read", "model", model, "replica", sub.replica, "error", err)
				continue
			}
			fx, c := p.kvReceive(sub, seq, b, s.now(), false)
			if fx.ReplayFrom >= 0 {
				if replay != "" {
					s.replayKV(ctx, p, sub, replay, fx.ReplayFrom)
				}
				fx, c = p.kvReceive(sub, seq, b, s.now(), true)
			}
			s.logKV(model, c)
		}
	}
}

// parseKVMessage reads a published message's frames: topic, sequence number, batch.
func parseKVMessage(frames [][]byte) (int64, kvevents.Batch, error) {
	if len(frames) != 3 || len(frames[1]) != 8 {
		return 0, kvevents.Batch{}, fmt.Errorf("a message of %d frames, want topic, 8-byte sequence number and payload", len(frames))
	}
	b, err := kvevents.DecodeBatch(frames[2])
	return int64(binary.BigEndian.Uint64(frames[1])), b, err
}

// parseKVReplay reads one message of a replay's answer, as the DEALER receives it: the
// ROUTER's empty delimiter, then the sequence number (8 bytes, -1 at the end) and the
// batch, or, from vLLM 0.26 on (its PR 45177), the topic, the sequence number and the
// batch (the end marker's topic and batch empty).
func parseKVReplay(frames [][]byte) (int64, []byte, error) {
	f := frames
	if len(f) > 0 && len(f[0]) == 0 && (len(f) == 3 || len(f) == 4) {
		f = f[1:]
	}
	if len(f) == 3 {
		f = f[1:] // the topic
	}
	if len(f) != 2 || len(f[0]) != 8 {
		return 0, nil, fmt.Errorf("a replay message of %d frames, want [topic,] 8-byte sequence number and batch", len(frames))
	}
	return int64(binary.BigEndian.Uint64(f[0])), f[1], nil
}

// replayKV asks the replay socket for the batches from start on and hands them to the
// pool, until the end marker, an error or kvReplayTimeout.
func (s *Server) replayKV(ctx context.Context, p *pool, sub *kvSubscription, endpoint string, start int64) {
	ctx, cancel := context.WithTimeout(ctx, kvReplayTimeout)
	defer cancel()
	d := zmq4.NewDealer(ctx, zmq4.WithDialerMaxRetries(0), zmq4.WithLogger(discardLogger))
	defer d.Close()
	model := p.b.Model
	fail := func(err error) {
		s.log.Warn("replica's KV event replay failed", "model", model, "replica", sub.replica, "from", start, "error", err)
	}
	if err := d.Dial(endpoint); err != nil {
		fail(err)
		return
	}
	var req [8]byte
	binary.BigEndian.PutUint64(req[:], uint64(start))
	if err := d.Send(zmq4.NewMsgFrom(nil, req[:])); err != nil {
		fail(err)
		return
	}
	for {
		m, err := d.Recv()
		if err != nil {
			fail(err)
			return
		}
		seq, payload, err := parseKVReplay(m.Frames)
		if err != nil {
			fail(err)
			return
		}
		if seq == -1 {
			return
		}
		b, err := kvevents.DecodeBatch(payload)
		if err != nil {
			fail(err)
			return
		}
		p.kvReplayed(sub, seq, b)
	}
}
