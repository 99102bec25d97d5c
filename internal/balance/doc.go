// Package balance tracks the state of a pool's replicas and chooses one for each attempt.
//
// It is pure: it holds no locks, starts no goroutines and reads no clock; time is passed in.
// The shell serialises access and feeds it the signals it observes (dial failures, probe
// results, how attempts ended, outstanding requests). It must never import the shell.
package balance
