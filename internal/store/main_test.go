package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Journals, pools and SQLite connections all own goroutines; every test
// must end them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
