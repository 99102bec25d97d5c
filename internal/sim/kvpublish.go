package sim

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fencegate/fencegate/internal/kvevents"
)

// kvPublisher is vLLM's ZmqEventPublisher: each batch of the prefix cache's events goes
// out on a PUB socket as three frames — the topic, the batch's sequence number (8 bytes,
// big-endian, from 0 in each process), the msgpack payload (kvevents.EncodeBatch) — and
// is kept, the last BufferSteps of them, for the replay socket: a ROUTER that answers a
// request [identity, "", start (8 bytes big-endian)] with every kept batch from start on,
// each as [identity, "", seq, payload], then [identity, "", -1 (8 bytes), ""]. Batches
// wait in a queue of MaxQueueSize, and a full queue blocks the engine, as vLLM's does.
type kvPublisher struct {
	topic    []byte
	pub      zmq4.Socket
	replay   zmq4.Socket // nil: no replay endpoint
	endpoint string      // as bound, the port resolved; "" when connected
	replayAt string
	queue    chan []kvevents.Event
	queued   atomic.Int64 // batches handed to publish, which numbers them in this order
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	seq      int64
	buffered []replayEntry // the last steps batches, oldest first
	steps    int
}

type replayEntry struct {
	seq     int64
	payload []byte
}

// endSeq is the replay's end marker: -1 as 8 bytes, big-endian.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// startKVPublisher opens the sockets of cfg: endpoint and replayEndpoint are cfg's, or the
// addresses a previous process of the replica bound (so that a restart binds them again).
func startKVPublisher(cfg KVEventsConfig, endpoint, replayEndpoint string) (*kvPublisher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &kvPublisher{topic: []byte(cfg.Topic), queue: make(chan []kvevents.Event, cfg.MaxQueueSize),
		ctx: ctx, cancel: cancel, steps: cfg.BufferSteps}
	p.pub = zmq4.NewPub(ctx)
	var err error
	if binds(endpoint) {
		if err = p.pub.Listen(endpoint); err == nil {
			p.endpoint = boundEndpoint(endpoint, p.pub)
		}
	} else {
		err = p.pub.Dial(endpoint)
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("sim: kv events endpoint %s: %w", endpoint, err)
	}
	if replayEndpoint != "" {
		p.replay = zmq4.NewRouter(ctx)
		if err := p.replay.Listen(replayEndpoint); err != nil {
			p.close()
			return nil, fmt.Errorf("sim: kv events replay endpoint %s: %w", replayEndpoint, err)
		}
		p.replayAt = boundEndpoint(replayEndpoint, p.replay)
		p.wg.Add(1)
		go p.serveReplay(ctx)
	}
	p.wg.Add(1)
	go p.run(ctx)
	return p, nil
}

// boundEndpoint is endpoint with the port the socket bound (for port 0 or "*").
func boundEndpoint(endpoint string, s zmq4.Socket) string {
	a := s.Addr()
	if a == nil || !strings.HasPrefix(endpoint, "tcp://") {
		return endpoint
	}
	host := endpoint[len("tcp://"):strings.LastIndex(endpoint, ":")]
	_, port, _ := strings.Cut(a.String()[strings.LastIndex(a.String(), ":"):], ":")
	return "tcp://" + host + ":" + port
}

// publish queues the events of one engine step (nothing when there are none).
func (p *kvPublisher) publish(events []kvevents.Event) {
	if len(events) == 0 {
		return
	}
	p.queued.Add(1)
	select {
	case p.queue <- events:
	case <-p.ctx.Done(): // the replica's process is gone
	}
}

func (p *kvPublisher) run(ctx context.Context) {
	defer p.wg.Done()
	for {
		var events []kvevents.Event
		select {
		case events = <-p.queue:
		case <-ctx.Done():
			return
		}
		payload, err := kvevents.EncodeBatch(kvevents.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: events, DPRank: 0})
		if err != nil {
			continue // cannot happen: the sim's events encode
		}
		p.mu.Lock()
		seq := p.seq
		p.seq++
		var seqb [8]byte
		binary.BigEndian.PutUint64(seqb[:], uint64(seq))
		// A subscriber that is gone or slow loses the batch, as a PUB socket drops it; the
		// replay buffer keeps it.
		_ = p.pub.Send(zmq4.NewMsgFrom(p.topic, seqb[:], payload))
		p.buffered = append(p.buffered, replayEntry{seq, payload})
		if len(p.buffered) > p.steps {
			p.buffered = p.buffered[len(p.buffered)-p.steps:]
		}
		p.mu.Unlock()
	}
}

func (p *kvPublisher) serveReplay(ctx context.Context) {
	defer p.wg.Done()
	for {
		msg, err := p.replay.Recv()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue // a client that went away
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue // vLLM logs "Invalid replay request" and answers nothing
		}
		id := msg.Frames[0]
		start := int64(binary.BigEndian.Uint64(msg.Frames[2]))
		p.mu.Lock()
		entries := append([]replayEntry(nil), p.buffered...)
		p.mu.Unlock()
		for _, e := range entries {
			if e.seq < start {
				continue
			}
			var seqb [8]byte
			binary.BigEndian.PutUint64(seqb[:], uint64(e.seq))
			_ = p.replay.Send(zmq4.NewMsgFrom(id, nil, seqb[:], e.payload))
		}
		_ = p.replay.Send(zmq4.NewMsgFrom(id, nil, endSeq, nil))
	}
}

// close stops publishing: batches still queued are dropped, as a process that dies drops
// them.
func (p *kvPublisher) close() {
	p.cancel()
	if p.pub != nil {
		_ = p.pub.Close()
	}
	if p.replay != nil {
		_ = p.replay.Close()
	}
	p.wg.Wait()
}

// startKVLocked starts the publisher of a new process of the replica, if it publishes; its
// batches are numbered from 0 again. The caller holds s.mu.
func (s *Server) startKVLocked() error {
	if s.cache.publish == nil {
		return nil
	}
	p, err := startKVPublisher(*s.cfg.KVEvents, s.kvEndpoint, s.kvReplayAddr)
	if err != nil {
		return err
	}
	s.kvMu.Lock()
	defer s.kvMu.Unlock()
	s.kvPub = p
	if p.endpoint != "" {
		s.kvEndpoint = p.endpoint
	}
	if p.replayAt != "" {
		s.kvReplayAddr = p.replayAt
	}
	return nil
}

// stopKVLocked closes the current process's publisher. The caller holds s.mu.
func (s *Server) stopKVLocked() {
	s.kvMu.Lock()
	p := s.kvPub
	s.kvPub = nil
	s.kvMu.Unlock()
	if p != nil {
		p.close()
	}
}

// publishKV hands the prefix cache's events to the current publisher (dropped while the
// replica is down).
func (s *Server) publishKV(events []kvevents.Event) {
	s.kvMu.Lock()
	p := s.kvPub
	s.kvMu.Unlock()
	if p != nil {
		p.publish(events)
	}
}

// KVEventsEndpoint is the address of the replica's KV event PUB socket as bound (the port
// resolved when the configuration gave 0), and of its replay socket ("" : none), for a
// subscriber on this host.
func (s *Server) KVEventsEndpoint() (pub, replay string) {
	s.kvMu.Lock()
	defer s.kvMu.Unlock()
	return s.kvEndpoint, s.kvReplayAddr
}

// KVEventsQueued is how many batches the replica's current process has queued for its
// publisher: the last of them is numbered KVEventsQueued()-1. For tests that wait until a
// subscriber has seen them; no engine reports it.
func (s *Server) KVEventsQueued() int64 {
	s.kvMu.Lock()
	defer s.kvMu.Unlock()
	if s.kvPub == nil {
		return 0
	}
	return s.kvPub.queued.Load()
}
