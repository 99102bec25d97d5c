package gateway

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

// Which attempt ends count against a replica's run of consecutive failures (and may eject
// it), which end the run, and which say nothing of the replica.
func TestReplicaBlame(t *testing.T) {
	end := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		info failover.AttemptInfo
		want blame
	}{
		{"completed", failover.AttemptInfo{EndReason: "completed"}, attemptCompleted},
		{"reset at prefill", failover.AttemptInfo{EndReason: "connection_reset", Failure: failover.Dead}, attemptFailed},
		{"closed mid-stream", failover.AttemptInfo{EndReason: "closed_mid_stream", Failure: failover.Dead}, attemptFailed},
		{"engine 500", failover.AttemptInfo{EndReason: "engine_status_500", Failure: failover.Dead}, attemptFailed},
		{"TGI 424", failover.AttemptInfo{EndReason: "engine_status_424", Failure: failover.Dead}, attemptFailed},
		{"engine error event", failover.AttemptInfo{EndReason: "engine_error_event", Failure: failover.Dead}, attemptFailed},
		{"malformed stream", failover.AttemptInfo{EndReason: "malformed_event", Failure: failover.Uncertain}, attemptFailed},
		{"stall before the first token", failover.AttemptInfo{EndReason: "first_token_timeout", Failure: failover.Uncertain}, attemptFailed},
		{"stall mid-stream", failover.AttemptInfo{EndReason: "idle_timeout", Failure: failover.Uncertain}, attemptFailed},
		{"dial refused", failover.AttemptInfo{EndReason: "connection_refused", Failure: failover.Dead, Dial: true}, attemptNeutral},
		{"engine refused the credentials", failover.AttemptInfo{EndReason: "engine_unauthorized", Failure: failover.Dead, Dial: true}, attemptNeutral},
		{"overloaded 429", failover.AttemptInfo{EndReason: "engine_status_429", Failure: failover.Overloaded}, attemptNeutral},
		{"overloaded 503", failover.AttemptInfo{EndReason: "engine_status_503", Failure: failover.Overloaded}, attemptNeutral},
		{"request rejected 400", failover.AttemptInfo{EndReason: "engine_status_400", Failure: failover.Rejected}, attemptNeutral},
		{"client gone", failover.AttemptInfo{EndReason: "client_gone"}, attemptNeutral},
		{"client stalled", failover.AttemptInfo{EndReason: "client_stalled"}, attemptNeutral},
		{"request deadline", failover.AttemptInfo{EndReason: "max_request_duration"}, attemptNeutral},
		{"ownership lost", failover.AttemptInfo{EndReason: "request_ownership_lost"}, attemptNeutral},
		{"declared dead by an operator", failover.AttemptInfo{EndReason: "replica_declared_dead", Failure: failover.Dead}, attemptNeutral},
		{"agent heartbeat lost", failover.AttemptInfo{EndReason: "agent_unreachable", Failure: failover.Uncertain}, attemptNeutral},
		{"not ended by the machine", failover.AttemptInfo{}, attemptNeutral},
	} {
		if tc.info.EndReason != "" {
			tc.info.Ended = end
		}
		if got := replicaBlame(tc.info); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
