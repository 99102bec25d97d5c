package lease

import (
	"testing"
	"time"
)

// newTestTracker returns a tracker with TTL 300 ms and drift margin 50 ms.
func newTestTracker(t *testing.T, maxDelivery time.Duration) *Tracker {
	t.Helper()
	tr, err := NewTracker(NewEpochs(1000), TrackerConfig{TTL: ms(300), DriftMargin: ms(50), MaxDelivery: maxDelivery})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %v ms, want %v ms", what, got.Sub(t0).Milliseconds(), want.Sub(t0).Milliseconds())
	}
}

func TestEpochsOnlyGrow(t *testing.T) {
	e := NewEpochs(SeedFromTime(at(0)))
	tr1, _ := NewTracker(e, TrackerConfig{})
	tr2, _ := NewTracker(e, TrackerConfig{})
	a := tr1.Grant("req_A.a1", at(0))
	b := tr2.Grant("req_B.a1", at(0))
	c := tr1.Grant("req_A.a2", at(0))
	if !(a < b && b < c) || a != SeedFromTime(at(0))+1 {
		t.Fatalf("epochs %d, %d, %d do not grow from the seed", a, b, c)
	}
	restarted := NewEpochs(SeedFromTime(at(1)))
	if next := restarted.Next(); next <= c {
		t.Fatalf("a gateway restarted 1 ms later starts at %d, not above %d", next, c)
	}
}

func TestTrackerDefaults(t *testing.T) {
	tr, err := NewTracker(NewEpochs(0), TrackerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := tr.Config()
	if c.TTL != DefaultTTL || c.DriftMargin != DefaultDriftMargin || c.HeartbeatTimeout != DefaultHeartbeatTimeout || c.MaxDelivery != 0 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if _, err := NewTracker(NewEpochs(0), TrackerConfig{TTL: -1}); err == nil {
		t.Fatal("negative TTL accepted")
	}
	if _, err := NewTracker(nil, TrackerConfig{}); err == nil {
		t.Fatal("nil Epochs accepted")
	}
}

func TestExpiresByFromGrant(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(100))
	wantTime(t, "ExpiresBy after grant", tr.ExpiresBy("a"), at(100+300+50))
	if !tr.ExpiresBy("nobody").IsZero() {
		t.Fatal("ExpiresBy of an unknown attempt is not zero")
	}
}

func TestExpiresByUsesAckTimeNotSendTime(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(0))
	seq, leases := tr.RenewalSent(at(100))
	if len(leases) != 1 || leases[0].Attempt != "a" {
		t.Fatalf("renewal carries %v", leases)
	}
	// The ack comes back late: the agent may have read the renewal just
	// before replying, so the lease may run until ack + TTL.
	tr.RenewalAcked(seq, at(700), map[string]Status{"a": Renewed})
	wantTime(t, "ExpiresBy after a late ack", tr.ExpiresBy("a"), at(700+300+50))
}

func TestUnackedRenewalInFlightExtendsExpiresBy(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(0))
	seq1, _ := tr.RenewalSent(at(100))
	tr.RenewalAcked(seq1, at(110), map[string]Status{"a": Renewed})
	tr.RenewalSent(at(200)) // no reply: lost request or lost reply, cannot tell
	wantTime(t, "ExpiresBy with a renewal in flight", tr.ExpiresBy("a"), at(200+300+50))

	withDelivery := newTestTracker(t, ms(80))
	withDelivery.Grant("a", at(0))
	withDelivery.RenewalSent(at(200))
	wantTime(t, "ExpiresBy with MaxDelivery", withDelivery.ExpiresBy("a"), at(280+300+50))
}

func TestAcksOutOfOrderNeverMoveBackwards(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(0))
	seq1, _ := tr.RenewalSent(at(100))
	seq2, _ := tr.RenewalSent(at(200))
	tr.RenewalAcked(seq2, at(250), map[string]Status{"a": Expired})
	st, final := tr.Status("a")
	if st != Expired || !final {
		t.Fatalf("status after final ack = %v final=%v", st, final)
	}
	// The older renewal's ack arrives afterwards and says renewed: the agent
	// read it first. It must not make the lease look alive again.
	tr.RenewalAcked(seq1, at(400), map[string]Status{"a": Renewed})
	st, final = tr.Status("a")
	if st != Expired || !final {
		t.Fatalf("older ack moved status back to %v final=%v", st, final)
	}
	wantTime(t, "ExpiresBy once reported final", tr.ExpiresBy("a"), at(250))
	if _, leases := tr.RenewalSent(at(500)); len(leases) != 0 {
		t.Fatalf("a final lease is still renewed: %v", leases)
	}
}

func TestOlderAckDoesNotLowerBound(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(0))
	seq1, _ := tr.RenewalSent(at(100))
	seq2, _ := tr.RenewalSent(at(200))
	tr.RenewalAcked(seq2, at(900), map[string]Status{"a": Renewed})
	tr.RenewalAcked(seq1, at(300), map[string]Status{"a": Renewed})
	wantTime(t, "ExpiresBy after out-of-order acks", tr.ExpiresBy("a"), at(900+300+50))
	st, _ := tr.Status("a")
	if st != Renewed {
		t.Fatalf("status = %v", st)
	}
	// A duplicate ack and an ack of a sequence number never sent change nothing.
	tr.RenewalAcked(seq2, at(5000), map[string]Status{"a": Expired})
	tr.RenewalAcked(99, at(5000), map[string]Status{"a": Expired})
	if st, final := tr.Status("a"); st != Renewed || final {
		t.Fatalf("duplicate or unknown ack changed status to %v", st)
	}
}

func TestFenceStopsRenewingAndFreezesExpiresBy(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(0))
	tr.Grant("b", at(0))
	seq, _ := tr.RenewalSent(at(100))
	tr.RenewalAcked(seq, at(120), map[string]Status{"a": Renewed, "b": Renewed})
	tr.Fence("a")
	if !tr.Fenced("a") || tr.Fenced("b") {
		t.Fatal("Fenced reports the wrong attempts")
	}
	before := tr.ExpiresBy("a")
	for i := int64(2); i < 6; i++ {
		seq, leases := tr.RenewalSent(at(i * 100))
		if len(leases) != 1 || leases[0].Attempt != "b" {
			t.Fatalf("renewal %d carries %v, want only b", i, leases)
		}
		tr.RenewalAcked(seq, at(i*100+10), map[string]Status{"b": Renewed})
	}
	wantTime(t, "ExpiresBy of the fenced attempt", tr.ExpiresBy("a"), before)
	wantTime(t, "ExpiresBy of the renewed attempt", tr.ExpiresBy("b"), at(510+300+50))
}

func TestStatusOfOlderGrantIsIgnored(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(0))
	seq, _ := tr.RenewalSent(at(100))
	tr.Grant("a", at(150)) // the same attempt id granted again, newer epoch
	tr.RenewalAcked(seq, at(200), map[string]Status{"a": Revoked})
	if _, final := tr.Status("a"); final {
		t.Fatal("a status about the older epoch made the newer grant final")
	}
	wantTime(t, "ExpiresBy after re-grant", tr.ExpiresBy("a"), at(200+300+50))
}

func TestHeartbeatAge(t *testing.T) {
	tr := newTestTracker(t, 0)
	if tr.HeartbeatAge(at(1000)) != 0 {
		t.Fatal("heartbeat age before any renewal is not 0")
	}
	seq1, _ := tr.RenewalSent(at(1000))
	if got := tr.HeartbeatAge(at(1500)); got != ms(500) {
		t.Fatalf("age before any ack = %v", got)
	}
	seq2, _ := tr.RenewalSent(at(2000))
	tr.RenewalAcked(seq2, at(2010), nil)
	tr.RenewalAcked(seq1, at(2005), nil) // late ack of the older renewal: age keeps the newest
	if got := tr.HeartbeatAge(at(3000)); got != ms(990) {
		t.Fatalf("age = %v, want 990ms", got)
	}
	if tr.HeartbeatFailed(at(3000)) {
		t.Fatal("heartbeat failed within the timeout")
	}
	if !tr.HeartbeatFailed(at(2010).Add(DefaultHeartbeatTimeout + 1)) {
		t.Fatal("heartbeat not failed after the timeout")
	}
}

func TestRemoveForgetsPendingRenewals(t *testing.T) {
	tr := newTestTracker(t, 0)
	tr.Grant("a", at(0))
	tr.Grant("b", at(0))
	for i := int64(1); i <= 5; i++ {
		tr.RenewalSent(at(i * 100)) // never acked
	}
	tr.Remove("a")
	if len(tr.pending) != 5 {
		t.Fatalf("pending = %d, want 5 (b is still carried)", len(tr.pending))
	}
	tr.Remove("b")
	if len(tr.pending) != 0 || tr.Len() != 0 {
		t.Fatalf("after removing all: %d pending, %d leases", len(tr.pending), tr.Len())
	}
	tr.Remove("never")
}
