package console

import (
	"time"
)

// Overview is the console's first page: every pool and its replicas, as /readyz shows them
// to an admin.
type Overview struct {
	Now      time.Time
	Draining bool
	Store    StoreState
	Pools    []Pool
}

// StoreState is whether the request journal answers, and why not.
type StoreState struct {
	Connected bool
	LastError string
	Since     time.Time
}

// Pool is one model's replicas.
type Pool struct {
	Model     string
	Available int
	Replicas  []Replica
}

// Replica is one replica of a pool: its state and why, its load, its fingerprint, its
// canary and its ejection.
type Replica struct {
	Name, URL     string
	Priority      int
	State, Reason string
	// Outstanding and Peak are the gateway's own count of its requests on the replica.
	Outstanding, Peak int
	// Running, Waiting and KVUsage are the load the engine reports.
	Running, Waiting int
	KVUsage          float64
	Fingerprint      []KeyValue
	EngineVersion    string
	// Canary is the consistency canary's verdict ("" when the pool runs none) and its
	// detail.
	Canary, CanaryDetail string
	ConsecutiveFailures  int
	// EjectedUntil is when the replica's ejection ends; zero when it is not ejected.
	EjectedUntil time.Time
}

// KeyValue is one member of a fingerprint.
type KeyValue struct{ Key, Value string }
