//go:build race

package bench

// raceEnabled: under the race detector sync.Pool drops items on purpose, so allocation
// counts include net/http's pooled buffers and say nothing about this package.
const raceEnabled = true
