package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/store"
)

// A stored key revoked elsewhere (another gateway, `fencegate keys revoke`) is refused
// once auth.store_refresh has passed, without anyone telling this gateway: until then the
// keys read last stand. Run on a fake clock.
func TestRevokedStoredKeyRefusedAfterRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := newPipeNet()
		engine := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
		go engine.Serve(network)
		st := store.NewMemory()
		createStoreKey(t, st, store.APIKey{ID: "tenant"}, "stored-key-0123456789")
		cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m", Replicas: []config.Replica{{URL: "http://engine.test"}}}}}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(context.Background(), cfg, gateway.Options{Store: st, Dial: network.Dial})
		if err != nil {
			t.Fatal(err)
		}
		gw.Start()
		models := func() int {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
			req.Header.Set("Authorization", "Bearer stored-key-0123456789")
			gw.Handler().ServeHTTP(rec, req)
			return rec.Code
		}
		if code := models(); code != 200 {
			t.Fatalf("a stored key: %d", code)
		}
		if err := st.RevokeKey(t.Context(), "tenant", time.Now()); err != nil {
			t.Fatal(err)
		}
		if code := models(); code != 200 {
			t.Fatalf("a revoked key before the next refresh: %d, want the keys read last to stand", code)
		}
		time.Sleep(config.DefaultKeyStoreRefresh)
		synctest.Wait()
		if code := models(); code != 401 {
			t.Fatalf("a revoked key after auth.store_refresh: %d, want 401", code)
		}
		gw.Close()
		engine.Close()
		network.Close()
		synctest.Wait()
	})
}
