package gateway_test

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/faultproxy"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/pgtest"
	"github.com/fencegate/fencegate/internal/store/storetest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// The tests here start a gateway whose PostgreSQL store refuses the connection: a
// faultproxy in front of the test server, refusing, then passing. Every retry of the store
// waits on a gate the test opens, so nothing depends on time.

// refusedStore is a fresh PostgreSQL schema behind a proxy that refuses connections until
// the test lets them through, and its DSN through the proxy.
func refusedStore(t *testing.T) (*faultproxy.Proxy, string) {
	t.Helper()
	dsn := pgtest.Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	proxy.Refuse(true)
	u.Host = proxy.Addr()
	return proxy, u.String()
}

// waitOpened waits until the gateway's store is open.
func waitOpened(t *testing.T, e *env) {
	t.Helper()
	select {
	case <-e.gw.StoreOpened():
	case <-testCtx(t).Done():
		t.Fatal("the store never opened")
	}
}

// storeUnavailable checks a 503 journal_unavailable answer: Retry-After a whole number of
// seconds, and x-should-retry: true (nothing was started, so the SDKs may send it again).
func storeUnavailable(t *testing.T, what string, a answer) {
	t.Helper()
	secs, err := strconv.Atoi(a.header.Get("Retry-After"))
	if a.status != http.StatusServiceUnavailable || err != nil || secs < 1 || a.header.Get("X-Should-Retry") != "true" {
		t.Errorf("%s: %d Retry-After %q x-should-retry %q %s", what, a.status, a.header.Get("Retry-After"), a.header.Get("X-Should-Retry"), a.body)
	}
}

// A gateway whose store refuses the connection starts; it serves requests without an
// Idempotency-Key, answers keyed ones 503 journal_unavailable in each API's shape, says
// so in /readyz and the metrics, and tries the store again with growing waits. When the
// store comes its schema is migrated, the requests served meanwhile are on record, and
// keyed requests are served. (The gateway takes no keys from the store, so it knows it is
// open; see TestNoKeysWhileTheStoreIsAway.)
func TestStartsWithoutTheStore(t *testing.T) {
	proxy, dsn := refusedStore(t)
	gate := storetest.NewRetryGate()
	noStoreKeys := false
	e := newEnv(t, envOptions{replicas: 1, storeRetry: store.DeferredOptions{Wait: gate.Wait}, config: func(c *config.Config) {
		c.Store = dsn
		c.Auth.StoreKeys = &noStoreKeys
	}})
	if d := gate.Next(t); d < store.DefaultRetryBase/2 || d > store.DefaultRetryBase {
		t.Errorf("first retry after %v, want within [%v, %v]", d, store.DefaultRetryBase/2, store.DefaultRetryBase)
	}

	ready := send(t, "GET", e.admin.URL+"/readyz", "", "")
	if ready.status != 200 || gjson.Get(ready.body, "store.connected").Bool() || gjson.Get(ready.body, "store.opened").Bool() ||
		!strings.Contains(gjson.Get(ready.body, "store.last_error").String(), "refused") ||
		!gjson.Get(ready.body, "store.next_retry").Exists() || gjson.Get(ready.body, "store.retries").Int() != 1 {
		t.Fatalf("/readyz while the store refuses: %d %s", ready.status, ready.body)
	}
	if !strings.Contains(e.metrics(), "fencegate_store_connected 0") {
		t.Error("fencegate_store_connected is not 0 while the store refuses")
	}

	// Unkeyed: served.
	plain := e.stream(testCtx(t), chatParams("without the store", 3))
	if plain.err != nil || plain.finish == "" {
		t.Fatalf("an unkeyed request while the store refuses: %+v", plain)
	}
	// Keyed: refused before anything reached a replica, in each API's shape.
	var resp *http.Response
	_, err := e.client.Chat.Completions.New(testCtx(t), chatParams("keyed", 3),
		option.WithHeader("Idempotency-Key", "while-down-1"), option.WithResponseInto(&resp))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Code != "journal_unavailable" {
		t.Fatalf("a keyed chat request while the store refuses: %v", err)
	}
	storeUnavailable(t, "keyed chat", answer{resp.StatusCode, resp.Header, ""})
	messages := send(t, "POST", e.srv.URL+"/v1/messages", "",
		`{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"keyed"}]}`, "Idempotency-Key", "while-down-2")
	storeUnavailable(t, "keyed messages", messages)
	if gjson.Get(messages.body, "type").String() != "error" || gjson.Get(messages.body, "error.type").String() != "overloaded_error" ||
		gjson.Get(messages.body, "error.code").String() != "journal_unavailable" {
		t.Errorf("a keyed Messages request is not answered in the Anthropic shape: %s", messages.body)
	}
	if n := e.totalSimRequests(); n != 1 {
		t.Fatalf("%d requests reached the replica, want the unkeyed one alone", n)
	}
	storeUnavailable(t, "GET /v1/requests/{id}", send(t, "GET", e.srv.URL+"/v1/requests/"+plain.requestID, "", ""))

	gate.Release() // a retry, still refused: the next wait is longer
	if d := gate.Next(t); d < store.DefaultRetryBase || d > 2*store.DefaultRetryBase {
		t.Errorf("second retry after %v, want within [%v, %v]", d, store.DefaultRetryBase, 2*store.DefaultRetryBase)
	}

	proxy.Refuse(false)
	gate.Release()
	waitOpened(t, e)
	ready = send(t, "GET", e.admin.URL+"/readyz", "", "")
	if !gjson.Get(ready.body, "store.connected").Bool() || gjson.Get(ready.body, "store.last_error").Exists() {
		t.Fatalf("/readyz once the store came: %s", ready.body)
	}
	if !strings.Contains(e.metrics(), "fencegate_store_connected 1") {
		t.Error("fencegate_store_connected is not 1 once the store came")
	}
	// The request served without the store is on record once the journal wrote it.
	if err := e.gw.FlushJournal(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if rec := e.record(plain.requestID); rec.Outcome != "completed" || len(rec.Attempts) != 1 {
		t.Fatalf("the request served without the store: %+v", rec)
	}
	// Keyed requests work, on the migrated schema.
	if _, err := e.client.Chat.Completions.New(testCtx(t), chatParams("keyed", 3), option.WithHeader("Idempotency-Key", "after-1")); err != nil {
		t.Fatalf("a keyed request once the store came: %v", err)
	}
}

// While the store's keys were never read, a configured key is served, a key that may be a
// stored one (or no key, when the configuration lists none) is answered 503 — never 401,
// which would tell a valid stored key it is not — and a missing key where keys are
// configured is 401. Once the store comes, its keys count at once. /readyz tells anyone
// whether the store answers, and only admins why not.
func TestStoredKeysWhileTheStoreIsAway(t *testing.T) {
	proxy, dsn := refusedStore(t)
	// A key stored before the gateway starts, through a direct connection.
	direct, err := store.Open(t.Context(), strings.Replace(dsn, proxy.Addr(), proxy.Target(), 1))
	if err != nil {
		t.Fatal(err)
	}
	createStoreKey(t, direct, store.APIKey{ID: "stored"}, "stored-key-0123456789")
	direct.Close()
	gate := storetest.NewRetryGate()
	e := newEnv(t, envOptions{replicas: 1, storeRetry: store.DeferredOptions{Wait: gate.Wait}, config: func(c *config.Config) {
		c.Store = dsn
		c.AdminListen = ""
		c.Auth.Keys = []config.APIKey{{ID: "configured", Key: "configured-key-0123456789"}}
	}})
	gate.Next(t)
	chat := chatFor("sim-model", 2)
	if a := send(t, "POST", e.srv.URL+"/v1/chat/completions", "configured-key-0123456789", chat); a.status != 200 {
		t.Errorf("a configured key while the store is away: %d %s", a.status, a.body)
	}
	for _, key := range []string{"stored-key-0123456789", "unknown-key-0123456789"} {
		a := send(t, "POST", e.srv.URL+"/v1/chat/completions", key, chat)
		storeUnavailable(t, "a key that may be stored", a)
		if gjson.Get(a.body, "error.code").String() != "journal_unavailable" {
			t.Errorf("a key that may be stored: %s", a.body)
		}
	}
	if a := send(t, "POST", e.srv.URL+"/v1/chat/completions", "", chat); a.status != 401 {
		t.Errorf("no key where keys are configured: %d %s", a.status, a.body)
	}
	ready := send(t, "GET", e.srv.URL+"/readyz", "", "")
	if ready.status != 200 || !gjson.Get(ready.body, "store").Exists() || gjson.Get(ready.body, "store.connected").Bool() ||
		gjson.Get(ready.body, "store.last_error").Exists() || gjson.Get(ready.body, "store.since").Exists() {
		t.Errorf("/readyz to anyone while the store is away: %s", ready.body)
	}

	proxy.Refuse(false)
	gate.Release()
	waitOpened(t, e)
	if a := send(t, "POST", e.srv.URL+"/v1/chat/completions", "stored-key-0123456789", chat); a.status != 200 {
		t.Errorf("a stored key once the store came: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", e.srv.URL+"/v1/chat/completions", "unknown-key-0123456789", chat); a.status != 401 {
		t.Errorf("an unknown key once the store came: %d %s", a.status, a.body)
	}
}

// With no key in the configuration, the gateway cannot tell whether it is open until it has
// read the store's keys; auth.store_keys: false says the store holds none that count, so it
// serves at once.
func TestNoKeysWhileTheStoreIsAway(t *testing.T) {
	for _, storeKeys := range []bool{true, false} {
		t.Run("store_keys="+strconv.FormatBool(storeKeys), func(t *testing.T) {
			_, dsn := refusedStore(t)
			gate := storetest.NewRetryGate()
			e := newEnv(t, envOptions{replicas: 1, storeRetry: store.DeferredOptions{Wait: gate.Wait}, config: func(c *config.Config) {
				c.Store = dsn
				c.Auth.StoreKeys = &storeKeys
			}})
			gate.Next(t)
			a := send(t, "POST", e.srv.URL+"/v1/chat/completions", "", chatFor("sim-model", 2))
			if storeKeys {
				storeUnavailable(t, "no configured key, the store's keys unread", a)
			} else if a.status != 200 {
				t.Errorf("auth.store_keys: false, no key: %d %s", a.status, a.body)
			}
			keyed := send(t, "POST", e.srv.URL+"/v1/chat/completions", "", chatFor("sim-model", 2), "Idempotency-Key", "k-1")
			storeUnavailable(t, "a keyed request", keyed)
		})
	}
}
