package store_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/storetest"
)

// sqlitePaths remembers which file each test store was opened on, so the
// suite can open a second handle (a second gateway process) on it.
var sqlitePaths sync.Map // store.Store -> string

func openSQLiteAt(t testing.TB, path string) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), "sqlite:"+path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	sqlitePaths.Store(s, path)
	t.Cleanup(func() {
		sqlitePaths.Delete(s)
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return s
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		New: func(t *testing.T) store.Store {
			return openSQLiteAt(t, filepath.Join(t.TempDir(), "journal.db"))
		},
		Peer: func(t *testing.T, s store.Store) store.Store {
			path, ok := sqlitePaths.Load(s)
			if !ok {
				t.Fatal("peer of an unknown sqlite store")
			}
			return openSQLiteAt(t, path.(string))
		},
	})
}
