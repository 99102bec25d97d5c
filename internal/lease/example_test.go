package lease_test

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
)

// The gateway's side of one agent: grant a lease, renew it, lose the agent,
// fence the attempt, and learn when it may be rerun without two replicas
// publishing.
func ExampleTracker() {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }

	epochs := lease.NewEpochs(lease.SeedFromTime(start))     // one per gateway process
	tr, _ := lease.NewTracker(epochs, lease.TrackerConfig{}) // one per agent; defaults: TTL 3s, margin 500ms

	epoch := tr.Grant("req_01J.a1", ms(0))
	fmt.Println("X-Fencegate-Lease:", lease.FormatHeader(epoch, tr.TTL()))

	seq, leases := tr.RenewalSent(ms(1000)) // POST /fencegate/v1/renew with these leases
	tr.RenewalAcked(seq, ms(1020), map[string]lease.Status{leases[0].Attempt: lease.Renewed})
	fmt.Println("expires by:", tr.ExpiresBy("req_01J.a1").Sub(start))

	tr.RenewalSent(ms(2000)) // no reply: it may still have reached the agent
	tr.RenewalSent(ms(3000)) // no reply
	fmt.Println("heartbeat failed:", tr.HeartbeatFailed(ms(3100)))

	tr.Fence("req_01J.a1") // uncertain: stop renewing, send a cancel, wait
	fmt.Println("expires by:", tr.ExpiresBy("req_01J.a1").Sub(start))
	// Output:
	// X-Fencegate-Lease: epoch=113752984780800001;ttl_ms=3000
	// expires by: 4.52s
	// heartbeat failed: true
	// expires by: 6.5s
}
