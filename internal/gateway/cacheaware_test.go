package gateway_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
)

// conversation is a chat conversation whose turns are sent with their whole history, as a
// chat client does: a shared system prompt, then each user turn and the answer it got.
type conversation struct {
	msgs []openai.ChatCompletionMessageParamUnion
}

func newConversation(system string) *conversation {
	return &conversation{msgs: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system)}}
}

// turn sends the next user message with the history and keeps the answer in it.
func (c *conversation) turn(t *testing.T, e *env, user string) streamResult {
	t.Helper()
	c.msgs = append(c.msgs, openai.UserMessage(user))
	p := chatParams("", 8)
	p.Messages = c.msgs
	r := e.stream(testCtx(t), p)
	if r.err != nil {
		t.Fatalf("turn %q: %v", user, r.err)
	}
	c.msgs = append(c.msgs, openai.AssistantMessage(r.content))
	return r
}

// servedBy is the one replica that served request id (the test fails if it ran twice).
func servedBy(t *testing.T, e *env, id string) (int, sim.Record) {
	t.Helper()
	for i, s := range e.sims {
		if recs := e.simRequestsOf(s, id); len(recs) == 1 {
			return i, recs[0]
		}
	}
	t.Fatalf("request %s was not served by exactly one replica", id)
	return -1, sim.Record{}
}

// longSystem is a system prompt of several prompt blocks, shared by every conversation.
var longSystem = "You are the assistant of a lighthouse museum. " + strings.Repeat("Answer briefly and cite the exhibit. ", 40)

// setReplicaState sets a replica's state through the admin endpoint.
func setReplicaState(t *testing.T, e *env, replica, state string) {
	t.Helper()
	resp := post(t, e.admin.URL+"/admin/replicas/sim-model/"+replica, `{"state":"`+state+`"}`)
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("admin %s %s: %d %s", replica, state, resp.StatusCode, b)
	}
}

// Under the cache-aware policy (the default) every turn of a conversation goes where its
// earlier turns went, and finds its history in that engine's prefix cache. The first turns
// land on sim-3 (the others draining then); afterwards every replica is idle and equal, so
// only the record of what sim-3 was sent keeps the conversations there (by load they would
// go to sim-1, by a hash of their shared system prompt to one replica for all).
func TestCacheAwareKeepsConversationOnItsReplica(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 3})
	convs := []*conversation{newConversation(longSystem), newConversation(longSystem)}
	setReplicaState(t, e, "sim-1", "draining")
	setReplicaState(t, e, "sim-2", "draining")
	for c, conv := range convs {
		r := conv.turn(t, e, fmt.Sprintf("Conversation %d opens: %s", c, strings.Repeat("tell me more ", 30)))
		if i, _ := servedBy(t, e, r.requestID); i != 2 {
			t.Fatalf("conversation %d opened on sim-%d while sim-1 and sim-2 drained", c, i+1)
		}
	}
	setReplicaState(t, e, "sim-1", "active")
	setReplicaState(t, e, "sim-2", "active")
	for turn := 1; turn < 4; turn++ {
		for c, conv := range convs {
			r := conv.turn(t, e, fmt.Sprintf("Conversation %d, question %d: %s", c, turn, strings.Repeat("tell me more ", 30)))
			i, rec := servedBy(t, e, r.requestID)
			if i != 2 {
				t.Fatalf("conversation %d turn %d went to sim-%d, its history is on sim-3", c, turn, i+1)
			}
			if rec.CachedTokens == 0 {
				t.Fatalf("conversation %d turn %d found nothing of its history in the cache: %+v", c, turn, rec)
			}
		}
	}
}

// A rerun goes to the healthy replica holding the longest prefix of the prompt, not to an
// idle one that holds none: sim-1 was sent the conversation's first turn, sim-3 another
// conversation with the same system prompt, sim-2 nothing; the second turn starts on
// sim-1, where the longest prefix is, which resets before any output, and is rerun on
// sim-3, where the system prompt is cached, although sim-2 comes first among the idle.
func TestRerunGoesToLongestCachedPrefix(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 3})
	conv := newConversation(longSystem)
	first := conv.turn(t, e, "Which lamp came first? "+strings.Repeat("Explain the optics. ", 20))
	if i, _ := servedBy(t, e, first.requestID); i != 0 {
		t.Fatalf("the first turn went to sim-%d, want sim-1 (all idle, none holds anything)", i+1)
	}
	// Another conversation with sim-1 and sim-2 draining: sim-3 holds the system prompt.
	setReplicaState(t, e, "sim-1", "draining")
	setReplicaState(t, e, "sim-2", "draining")
	other := newConversation(longSystem)
	r := other.turn(t, e, "Who kept the lamp? "+strings.Repeat("Name the keepers. ", 20))
	if i, _ := servedBy(t, e, r.requestID); i != 2 {
		t.Fatalf("with sim-1 and sim-2 draining the other conversation went to sim-%d", i+1)
	}
	setReplicaState(t, e, "sim-1", "active")
	setReplicaState(t, e, "sim-2", "active")

	e.sims[0].ArmFault("reset@prefill", 1)
	second := conv.turn(t, e, "And the second lamp? "+strings.Repeat("Explain the clockwork. ", 20))
	if n := len(e.simRequestsOf(e.sims[0], second.requestID)); n != 1 {
		t.Fatalf("the second turn ran %d times on sim-1, want once (its reset)", n)
	}
	if n := len(e.simRequestsOf(e.sims[1], second.requestID)); n != 0 {
		t.Fatal("the rerun went to sim-2, which holds nothing of the conversation")
	}
	recs := e.simRequestsOf(e.sims[2], second.requestID)
	if len(recs) != 1 || recs[0].CachedTokens == 0 {
		t.Fatalf("the rerun on sim-3: %+v; want one request that found its history cached", recs)
	}
}
