package store_test

import (
	"testing"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			s := store.NewMemory()
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
