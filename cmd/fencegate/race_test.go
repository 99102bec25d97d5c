//go:build race

package main

// raceEnabled tells a test that builds the command to build it with -race too, so the
// packages this test binary compiled are reused rather than compiled again.
const raceEnabled = true
