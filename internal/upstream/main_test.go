package upstream

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(benchEngineEnv) != "" {
		serveBenchEngine() // this process is the benchmarks' engine (h1bench_test.go)
	}
	os.Exit(m.Run())
}
